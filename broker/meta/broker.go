package meta

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/go-logr/logr"
	clientv3 "go.etcd.io/etcd/client/v3"
	"go.etcd.io/etcd/client/v3/concurrency"
)

// Registration is a live broker registration: the broker's record, bound to
// an etcd lease that a session keeps alive. When the broker stops renewing
// (crash, partition from etcd) the lease expires, etcd deletes the record,
// and the controller reacts.
type Registration struct {
	store   *Store
	session *concurrency.Session
	info    BrokerInfo
}

// RegisterBroker registers info under a new lease with the given TTL (etcd
// rounds to whole seconds, minimum 1s) and keeps it alive until Close or
// until the lease is lost. It fails with ErrBrokerIDInUse while another
// registration of the same ID is alive.
func (s *Store) RegisterBroker(ctx context.Context, info BrokerInfo, ttl time.Duration) (*Registration, error) {
	if info.ID < 0 {
		return nil, fmt.Errorf("register broker: negative ID %d", info.ID)
	}
	// Every registration (incarnation) gets its own secret: a token seen
	// by an earlier incarnation's peers stops working with it.
	token, err := newFetchToken()
	if err != nil {
		return nil, fmt.Errorf("register broker %d: %w", info.ID, err)
	}
	info.FetchToken = token
	seconds := max(int(ttl.Round(time.Second)/time.Second), 1)
	// The lease is granted under ctx: NewSession would grant it under the
	// client's context, never cancelled, and with etcd gone (a managed etcd
	// deleted with its cluster) wait forever, so a broker shutting down
	// while Maintain registers again never stopped. The session's
	// keepalive runs on its own context, not ctx: ctx bounds only this call.
	lease, err := s.client.Grant(ctx, int64(seconds))
	if err != nil {
		return nil, fmt.Errorf("register broker %d: lease: %w", info.ID, err)
	}
	session, err := concurrency.NewSession(s.client, concurrency.WithTTL(seconds), concurrency.WithLease(lease.ID))
	if err != nil {
		// Unused, it expires after the TTL anyway.
		rctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), time.Second)
		_, _ = s.client.Revoke(rctx, lease.ID)
		cancel()
		return nil, fmt.Errorf("register broker %d: lease: %w", info.ID, err)
	}
	key := s.keys.broker(info.ID)
	resp, err := s.commit(ctx, fmt.Sprintf("register broker %d", info.ID),
		[]clientv3.Cmp{clientv3.Compare(clientv3.CreateRevision(key), "=", 0)},
		[]clientv3.Op{clientv3.OpPut(key, encode(info), clientv3.WithLease(session.Lease()))})
	if err != nil {
		session.Close()
		return nil, fmt.Errorf("register broker %d: %w", info.ID, err)
	}
	if !resp.Succeeded {
		session.Close()
		return nil, fmt.Errorf("%w: broker %d", ErrBrokerIDInUse, info.ID)
	}
	info.Epoch = resp.Header.Revision
	logr.FromContextOrDiscard(ctx).Info("registered broker", "broker", info.ID, "zone", info.Zone, "epoch", info.Epoch, "lease", session.Lease())
	return &Registration{store: s, session: session, info: info}, nil
}

// Info returns the registered record, with its Epoch.
func (r *Registration) Info() BrokerInfo { return r.info }

// Lease returns the etcd lease the registration is bound to.
func (r *Registration) Lease() clientv3.LeaseID { return r.session.Lease() }

// Done is closed when the lease is lost (expired, revoked) or the
// registration closed. The broker must then stop acting as leader of
// anything and register again.
func (r *Registration) Done() <-chan struct{} { return r.session.Done() }

// EnterControlledShutdown marks the registration as shutting down
// (BrokerInfo.ShuttingDown), so that the controller moves the broker's
// leaderships to other ISR members before it stops serving: Kafka's
// controlled shutdown. The write compares the record's lease, so only this
// incarnation can mark itself; a registration that was lost meanwhile
// (ErrSessionLost) has nothing left to hand over. Watch the metadata
// (LeaderHandoff) to learn when the controller is done.
func (r *Registration) EnterControlledShutdown(ctx context.Context) error {
	key := r.store.keys.broker(r.info.ID)
	info := r.info
	info.ShuttingDown = true
	resp, err := r.store.commit(ctx, fmt.Sprintf("broker %d: controlled shutdown", r.info.ID),
		[]clientv3.Cmp{clientv3.Compare(clientv3.LeaseValue(key), "=", r.session.Lease())},
		[]clientv3.Op{clientv3.OpPut(key, encode(info), clientv3.WithLease(r.session.Lease()))})
	if err != nil {
		return fmt.Errorf("broker %d: controlled shutdown: %w", r.info.ID, err)
	}
	if !resp.Succeeded {
		return fmt.Errorf("%w: broker %d: controlled shutdown: registration gone", ErrSessionLost, r.info.ID)
	}
	return nil
}

// Close deregisters the broker: it deletes the record and bumps the
// metadata version in one transaction (so that watchers see a versioned
// change, which a lease expiry is not), then revokes the lease.
func (r *Registration) Close(ctx context.Context) error {
	key := r.store.keys.broker(r.info.ID)
	_, err := r.store.commit(ctx, fmt.Sprintf("deregister broker %d", r.info.ID),
		[]clientv3.Cmp{clientv3.Compare(clientv3.LeaseValue(key), "=", r.session.Lease())},
		[]clientv3.Op{clientv3.OpDelete(key)})
	// Revoking the lease removes the record anyway; report the first error.
	cerr := r.session.Close()
	if err != nil {
		return fmt.Errorf("deregister broker %d: %w", r.info.ID, err)
	}
	if cerr != nil {
		return fmt.Errorf("deregister broker %d: revoke lease: %w", r.info.ID, cerr)
	}
	return nil
}

// Maintain keeps a broker registered until ctx ends: it registers (retrying
// while a previous registration of the ID is still alive, i.e. until the
// lease of the broker's previous run expires), calls run with the
// registration, and when the lease is lost registers again and calls run
// again. run must return once reg.Done() is closed or its ctx ends; the
// broker stops leading anything then, since its partitions are being moved.
// On return the registration is closed (deregistered at once).
func (s *Store) Maintain(ctx context.Context, info BrokerInfo, ttl time.Duration, run func(ctx context.Context, reg *Registration)) error {
	log := logr.FromContextOrDiscard(ctx).WithValues("broker", info.ID)
	backoff := newBackoff(100*time.Millisecond, ttl)
	for {
		reg, err := s.RegisterBroker(ctx, info, ttl)
		if err != nil {
			if ctx.Err() != nil {
				return nil
			}
			if !errors.Is(err, ErrBrokerIDInUse) {
				log.Error(err, "registering broker, will retry")
			} else {
				log.V(1).Info("previous registration still alive, waiting for its lease to expire")
			}
			if !backoff.wait(ctx) {
				return nil
			}
			continue
		}
		backoff.reset()
		run(ctx, reg)
		select {
		case <-reg.Done():
			log.Info("registration lost; registering again")
		default:
			// ctx ended (or run returned early): deregister cleanly.
			cctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), 5*time.Second)
			err := reg.Close(cctx)
			cancel()
			if ctx.Err() != nil {
				return err
			}
			return fmt.Errorf("broker %d: run returned while the registration was alive", info.ID)
		}
		if ctx.Err() != nil {
			return nil
		}
	}
}
