package protocol

// ListTransactions (key 66), versions 0-1 (KIP-664, KIP-994).
//
// The transactional IDs this broker coordinates that the principal may
// DESCRIBE, filtered by state names (unknown names are echoed in
// UnknownStateFilters), producer IDs and, v1+, a minimum running time of
// the ongoing transaction. v2 (a regular expression on the ID) is not
// served.

import (
	"context"
	"slices"

	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/strata-dev/strata/broker/txn"
)

func init() { register(kmsg.ListTransactions, 0, 1, handleListTransactions) }

func handleListTransactions(ctx context.Context, r *Request) (kmsg.Response, error) {
	if err := r.CheckVersion(); err != nil {
		return nil, err
	}
	req := r.Msg.(*kmsg.ListTransactionsRequest)
	resp := r.NewResponse().(*kmsg.ListTransactionsResponse)
	var states []txn.State
	for _, name := range req.StateFilters {
		if st, ok := txn.ParseState(name); ok {
			states = append(states, st)
		} else {
			resp.UnknownStateFilters = append(resp.UnknownStateFilters, name)
		}
	}
	if len(req.StateFilters) > 0 && len(states) == 0 {
		return resp, nil // only unknown states: nothing matches
	}
	if r.Env.Txns == nil {
		return resp, nil
	}
	mds, err := r.Env.Txns.List(ctx)
	if err != nil {
		resp.ErrorCode = err.Code
		return resp, nil
	}
	now := r.Env.Txns.Now().UnixMilli()
	for _, md := range mds {
		switch {
		case len(states) > 0 && !slices.Contains(states, md.State),
			len(req.ProducerIDFilters) > 0 && !slices.Contains(req.ProducerIDFilters, md.ProducerID),
			req.Version >= 1 && req.DurationFilterMillis >= 0 && (md.StartMillis < 0 || now-md.StartMillis < req.DurationFilterMillis),
			!r.authorizedQuiet(kmsg.ACLOperationDescribe, kmsg.ACLResourceTypeTransactionalId, md.TransactionalID):
			continue
		}
		ts := kmsg.NewListTransactionsResponseTransactionState()
		ts.TransactionalID, ts.ProducerID, ts.TransactionState = md.TransactionalID, md.ProducerID, md.State.String()
		resp.TransactionStates = append(resp.TransactionStates, ts)
	}
	slices.SortFunc(resp.TransactionStates, func(a, b kmsg.ListTransactionsResponseTransactionState) int {
		if a.TransactionalID < b.TransactionalID {
			return -1
		}
		if a.TransactionalID > b.TransactionalID {
			return 1
		}
		return 0
	})
	return resp, nil
}
