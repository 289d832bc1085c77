package tensorboard

import (
	"bytes"
	"fmt"
	"image"
	"image/color"
	"image/png"
	"net/url"
	"path/filepath"
	"strings"
)

// pngPicture checks that b is a PNG and describes it for an image summary. The colorspace is
// what summary.proto names: 1 gray, 3 RGB, 4 RGBA (a palette with any translucent entry counts
// as RGBA).
func pngPicture(tag string, b []byte) (picture, error) {
	cfg, err := png.DecodeConfig(bytes.NewReader(b))
	if err != nil {
		return picture{}, fmt.Errorf("not a PNG: %w", err)
	}
	return picture{tag: tag, png: b, width: cfg.Width, height: cfg.Height, colorspace: colorspace(cfg)}, nil
}

func colorspace(cfg image.Config) int {
	switch m := cfg.ColorModel.(type) {
	case color.Palette:
		for _, c := range m {
			if _, _, _, a := c.RGBA(); a != 0xffff {
				return 4
			}
		}
		return 3
	}
	switch cfg.ColorModel {
	case color.GrayModel, color.Gray16Model:
		return 1
	case color.RGBAModel, color.RGBA64Model:
		return 3 // the PNG decoder reports truecolor without alpha as opaque RGBA
	}
	return 4
}

// plotTag names a plot after its file: "plots/kv_cache_usage_perc" for
// ".../kv_cache_usage_perc.png". TensorBoard groups tags by their first segment.
func plotTag(path string) string {
	base := filepath.Base(path)
	return "plots/" + strings.TrimSuffix(base, filepath.Ext(base))
}

// workerTag is the tag of a per-worker metric: the key, then the target without scheme and
// /metrics path, then the engine when there is one, e.g. "vllm/num_preemptions/10.0.0.7:8000/1".
// The W&B sink names workers the same way so that both trackers show the same names.
func workerTag(key, target, engine string) string {
	w := target
	if u, err := url.Parse(target); err == nil && u.Host != "" {
		w = u.Host
		if p := strings.Trim(strings.TrimSuffix(u.Path, "/metrics"), "/"); p != "" {
			w += "_" + strings.ReplaceAll(p, "/", "_")
		}
	}
	if engine != "" {
		w += "/" + engine
	}
	return key + "/" + w
}
