package verify

import (
	"context"
	"encoding/json"
	"net/http"
	"sync"
	"time"
)

// Runner is one `strata verify` run behind its HTTP interface: it starts
// the workload (waiting for the cluster), runs it until asked to stop (a
// POST /stop, the end of the Run context, or the duration), then drains
// and keeps the final status.
type Runner struct {
	opts         Options
	drainTimeout time.Duration

	stopOnce sync.Once
	stopReq  chan struct{} // closed by Stop
	finished chan struct{} // closed when final is set

	mu       sync.Mutex
	w        *Workload
	startErr string
	final    *Status
}

// NewRunner prepares a run; nothing starts before Run.
func NewRunner(opts Options, drainTimeout time.Duration) *Runner {
	return &Runner{opts: opts, drainTimeout: drainTimeout, stopReq: make(chan struct{}), finished: make(chan struct{})}
}

// Run runs the workload until ctx ends, duration passes (0: no limit) or
// Stop is called, then drains for at most the drain timeout and returns
// the final status. An error means the workload never started.
func (r *Runner) Run(ctx context.Context, duration time.Duration) (Status, error) {
	defer close(r.finished)
	runCtx, cancel := context.WithCancel(ctx)
	defer cancel()
	go func() {
		select {
		case <-r.stopReq:
			cancel()
		case <-runCtx.Done():
		}
	}()
	if duration > 0 {
		var c context.CancelFunc
		runCtx, c = context.WithTimeout(runCtx, duration)
		defer c()
	}
	opts := r.opts
	opts.startError = func(err error) {
		r.mu.Lock()
		r.startErr = "starting: " + err.Error()
		r.mu.Unlock()
	}
	w, err := Start(runCtx, opts)
	if err != nil {
		st := Status{Done: true, Topic: opts.Topic, LastError: err.Error()}
		r.mu.Lock()
		r.startErr, r.final = err.Error(), &st
		r.mu.Unlock()
		return st, err
	}
	defer w.Close()
	r.mu.Lock()
	r.w = w
	r.mu.Unlock()

	<-runCtx.Done()
	// The drain runs on its own clock: a SIGTERM ended ctx already.
	st := w.Drain(context.WithoutCancel(ctx), r.drainTimeout)
	r.mu.Lock()
	r.final = &st
	r.mu.Unlock()
	return st, nil
}

// Stop asks Run to stop producing and drain; it does not wait.
func (r *Runner) Stop() { r.stopOnce.Do(func() { close(r.stopReq) }) }

// Ready says whether the workload runs (the topic exists, the clients
// started).
func (r *Runner) Ready() bool {
	r.mu.Lock()
	defer r.mu.Unlock()
	return r.w != nil && r.final == nil
}

// Status is the status so far (or the final one).
func (r *Runner) Status() Status {
	r.mu.Lock()
	defer r.mu.Unlock()
	switch {
	case r.final != nil:
		return *r.final
	case r.w != nil:
		return r.w.Status()
	}
	return Status{Topic: r.opts.Topic, LastError: r.startLastError()}
}

// startLastError is what the start met so far (the workload is not
// created before the topic exists).
func (r *Runner) startLastError() string {
	if r.startErr != "" {
		return r.startErr
	}
	return "starting: waiting for the cluster and topic " + r.opts.Topic
}

// Handler serves GET /status, POST /stop (answers with the final status
// once drained) and GET /healthz (200 once the workload runs).
func (r *Runner) Handler() http.Handler {
	mux := http.NewServeMux()
	mux.HandleFunc("GET /status", func(rw http.ResponseWriter, _ *http.Request) {
		writeJSON(rw, r.Status())
	})
	mux.HandleFunc("POST /stop", func(rw http.ResponseWriter, req *http.Request) {
		r.Stop()
		select {
		case <-r.finished:
			writeJSON(rw, r.Status())
		case <-req.Context().Done():
		}
	})
	mux.HandleFunc("GET /healthz", func(rw http.ResponseWriter, _ *http.Request) {
		if !r.Ready() {
			http.Error(rw, "not running", http.StatusServiceUnavailable)
			return
		}
		_, _ = rw.Write([]byte("ok\n"))
	})
	return mux
}

func writeJSON(rw http.ResponseWriter, v any) {
	rw.Header().Set("Content-Type", "application/json")
	enc := json.NewEncoder(rw)
	enc.SetIndent("", "  ")
	_ = enc.Encode(v)
}
