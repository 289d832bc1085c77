package timeline

import (
	"strings"
	"testing"

	"github.com/vllmstat/vllmstat/internal/step"
)

// TestActivityInFile: a worker's busy and idle time sit after its labels and before its series,
// last_busy_s only when it was busy, and nothing for a worker without activity; reading the file
// gives them back.
func TestActivityInFile(t *testing.T) {
	r := testRecord()
	ws := r.Timeline.Workers
	ws[0].Activity = &step.Activity{BusyS: 1.5, IdleS: 0.5, LastBusyS: 2} // w1, sorted second
	ws[0].Labels = `ReplicaId="r1"`
	ws[1].Activity = &step.Activity{IdleS: 2.5} // w0: never busy
	data, err := Marshal(FromRecord(r))
	if err != nil {
		t.Fatal(err)
	}
	s := string(data)
	for _, part := range []string{
		`{"target":"http://w0:8000/metrics","engine":"","busy_s":0,"idle_s":2.5,"series":{`,
		`{"target":"http://w1:8000/metrics","engine":"0","labels":{"ReplicaId":"r1"},"busy_s":1.5,"idle_s":0.5,"last_busy_s":2,"series":{`,
	} {
		if !strings.Contains(s, part) {
			t.Errorf("file lacks %s:\n%s", part, s)
		}
	}
	f, err := Unmarshal(data)
	if err != nil {
		t.Fatal(err)
	}
	if a := f.Workers[0].Activity(); a == nil || *a != *ws[1].Activity || f.Workers[0].LastBusyS != nil {
		t.Errorf("w0 activity %+v (last busy %v), want %+v without last busy", a, f.Workers[0].LastBusyS, ws[1].Activity)
	}
	if a := f.Workers[1].Activity(); a == nil || *a != *ws[0].Activity {
		t.Errorf("w1 activity %+v, want %+v", a, ws[0].Activity)
	}
	// A record without activity (older files, hand-made records) has none of the keys.
	data, err = Marshal(FromRecord(testRecord()))
	if err != nil {
		t.Fatal(err)
	}
	if strings.Contains(string(data), "busy_s") || strings.Contains(string(data), "idle_s") {
		t.Errorf("activity keys without activity:\n%s", data)
	}
	if f, _ := Unmarshal(data); f.Workers[0].Activity() != nil {
		t.Errorf("activity read from a file without it")
	}
}
