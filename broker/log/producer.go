package log

import "github.com/strata-dev/strata/broker/record"

// producerStates tracks idempotent producers. (Phase 1: no checks yet.)
type producerStates struct{}

type producerBatch struct {
	firstOffset, lastOffset, appendTime int64
}

type pendingProducers struct{}

func (p *producerStates) check(batches []record.Batch, asLeader bool, leo int64) (*pendingProducers, *producerBatch, error) {
	return nil, nil, nil
}

func (p *producerStates) commit(*pendingProducers, int64) {}

func (p *producerStates) rebuild(*Log) error { return nil }
func (p *producerStates) truncateHead(int64) {}
func (p *producerStates) reset()             {}
