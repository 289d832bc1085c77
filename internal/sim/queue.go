package sim

// requestQueue is a double-ended queue of requests: vLLM's waiting queue is served first come,
// first served, but a preempted request goes back to the front.
type requestQueue struct {
	buf        []*request
	head, size int
}

func (q *requestQueue) len() int { return q.size }

func (q *requestQueue) front() *request { return q.buf[q.head] }

// at is the i-th request from the front.
func (q *requestQueue) at(i int) *request { return q.buf[(q.head+i)%len(q.buf)] }

func (q *requestQueue) grow() {
	n := max(2*len(q.buf), 16)
	buf := make([]*request, n)
	for i := range q.size {
		buf[i] = q.buf[(q.head+i)%len(q.buf)]
	}
	q.buf, q.head = buf, 0
}

func (q *requestQueue) pushBack(r *request) {
	if q.size == len(q.buf) {
		q.grow()
	}
	q.buf[(q.head+q.size)%len(q.buf)] = r
	q.size++
}

func (q *requestQueue) pushFront(r *request) {
	if q.size == len(q.buf) {
		q.grow()
	}
	q.head = (q.head - 1 + len(q.buf)) % len(q.buf)
	q.buf[q.head] = r
	q.size++
}

func (q *requestQueue) popFront() *request {
	r := q.buf[q.head]
	q.buf[q.head] = nil
	q.head = (q.head + 1) % len(q.buf)
	q.size--
	return r
}

// clear empties the queue and returns how many requests it held.
func (q *requestQueue) clear() int {
	n := q.size
	for q.size > 0 {
		q.popFront()
	}
	return n
}
