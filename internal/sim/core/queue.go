package core

// requestQueue is a double-ended queue of requests: vLLM's waiting queue is served first come,
// first served, but a preempted request goes back to the front.
type requestQueue struct {
	Buf        []*Request
	Head, size int
}

func (q *requestQueue) Len() int { return q.size }

func (q *requestQueue) front() *Request { return q.Buf[q.Head] }

// at is the i-th request from the front.
func (q *requestQueue) at(i int) *Request { return q.Buf[(q.Head+i)%len(q.Buf)] }

func (q *requestQueue) grow() {
	n := max(2*len(q.Buf), 16)
	buf := make([]*Request, n)
	for i := range q.size {
		buf[i] = q.Buf[(q.Head+i)%len(q.Buf)]
	}
	q.Buf, q.Head = buf, 0
}

func (q *requestQueue) pushBack(r *Request) {
	if q.size == len(q.Buf) {
		q.grow()
	}
	q.Buf[(q.Head+q.size)%len(q.Buf)] = r
	q.size++
}

func (q *requestQueue) pushFront(r *Request) {
	if q.size == len(q.Buf) {
		q.grow()
	}
	q.Head = (q.Head - 1 + len(q.Buf)) % len(q.Buf)
	q.Buf[q.Head] = r
	q.size++
}

func (q *requestQueue) popFront() *Request {
	r := q.Buf[q.Head]
	q.Buf[q.Head] = nil
	q.Head = (q.Head + 1) % len(q.Buf)
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
