package compat

import (
	"context"
	"errors"
	"os"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/IBM/sarama"
	"github.com/segmentio/kafka-go"
	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kgo"
)

// moduleVersion reads the version of a dependency from the repository's
// go.mod (test binaries carry no dependency build info).
func moduleVersion(path string) string {
	data, err := os.ReadFile("../../go.mod")
	if err != nil {
		return "unknown"
	}
	for _, line := range strings.Split(string(data), "\n") {
		f := strings.Fields(line)
		if len(f) >= 2 && f[0] == path {
			return f[1]
		}
		if len(f) >= 3 && f[0] == "require" && f[1] == path {
			return f[2]
		}
	}
	return "unknown"
}

// goMember runs a consumer loop in a goroutine; stop cancels it and
// closes the client.
type goMember struct {
	once   sync.Once
	cancel context.CancelFunc
	done   chan struct{}
	close  func(t *testing.T)
}

func (m *goMember) stop(t *testing.T) {
	m.once.Do(func() {
		m.cancel()
		<-m.done
		m.close(t)
	})
}

func startGoMember(t *testing.T, loop func(ctx context.Context), closeFn func(t *testing.T)) *goMember {
	ctx, cancel := context.WithCancel(context.Background())
	m := &goMember{cancel: cancel, done: make(chan struct{}), close: closeFn}
	go func() {
		defer close(m.done)
		loop(ctx)
	}()
	t.Cleanup(func() { m.stop(t) })
	return m
}

// --- franz-go ---

// franzGo is franz-go's kgo; with kip848 its group members use the
// KIP-848 consumer protocol (group.protocol=consumer: ServerSideBalancer,
// ConsumerGroupHeartbeat and the broker's uniform assignor).
type franzGo struct{ kip848 bool }

func (f franzGo) version(*testing.T) string {
	v := "franz-go kgo " + moduleVersion("github.com/twmb/franz-go")
	if f.kip848 {
		v += " (group.protocol=consumer)"
	}
	return v
}

func (franzGo) produce(t *testing.T, addr string, recs []record) {
	cl, err := kgo.NewClient(kgo.SeedBrokers(addr), kgo.DefaultProduceTopic(topic), kgo.RequiredAcks(kgo.AllISRAcks()))
	if err != nil {
		t.Fatal(err)
	}
	defer cl.Close()
	krs := make([]*kgo.Record, len(recs))
	for i, r := range recs {
		krs[i] = &kgo.Record{Key: []byte(r.key), Value: []byte(r.value)}
	}
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	if err := cl.ProduceSync(ctx, krs...).FirstErr(); err != nil {
		t.Fatalf("franz-go produce: %v", err)
	}
}

func (f franzGo) startMember(t *testing.T, addr, name string, out chan<- consumed) member {
	opts := []kgo.Opt{kgo.SeedBrokers(addr), kgo.ClientID(name), kgo.ConsumerGroup(group), kgo.ConsumeTopics(topic),
		kgo.ConsumeResetOffset(kgo.NewOffset().AtStart())}
	if f.kip848 {
		opts = append(opts, kgo.ServerSideBalancer())
	}
	cl, err := kgo.NewClient(opts...)
	if err != nil {
		t.Fatal(err)
	}
	return startGoMember(t, func(ctx context.Context) {
		for {
			fs := cl.PollFetches(ctx)
			if ctx.Err() != nil || fs.IsClientClosed() {
				return
			}
			fs.EachRecord(func(r *kgo.Record) { out <- consumed{name, r.Partition, r.Offset, string(r.Key)} })
		}
	}, func(t *testing.T) {
		ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
		defer cancel()
		if f.kip848 {
			// kgo falls back to the classic protocol when the broker
			// does not serve KIP-848: make sure it did not.
			described, err := kadm.NewClient(cl).DescribeConsumerGroups(ctx, group)
			found := false
			for _, m := range described[group].Members {
				found = found || m.ClientID == name
			}
			if err != nil || described[group].Err != nil || !found {
				t.Errorf("%s is not a member of consumer-protocol group %s: %v %+v", name, group, err, described[group])
			}
		}
		if err := cl.CommitUncommittedOffsets(ctx); err != nil {
			t.Errorf("%s commit: %v", name, err)
		}
		cl.Close() // leaves the group
	})
}

func TestFranzGo(t *testing.T) { runScenario(t, franzGo{}) }

// TestFranzGoBrokerRestart restarts the broker under a franz-go group.
func TestFranzGoBrokerRestart(t *testing.T) { runScenarioWith(t, franzGo{}, true) }

// TestFranzGoConsumerProtocol runs the group scenario on the KIP-848
// consumer protocol; the scenario's DescribeGroups checks see the group
// as Kafka shows a consumer-protocol group there.
func TestFranzGoConsumerProtocol(t *testing.T) { runScenario(t, franzGo{kip848: true}) }

// TestFranzGoConsumerProtocolBrokerRestart restarts the broker under a
// KIP-848 group: its members' epochs and assignments come back from the
// offsets store.
func TestFranzGoConsumerProtocolBrokerRestart(t *testing.T) {
	runScenarioWith(t, franzGo{kip848: true}, true)
}

// --- Sarama ---

type saramaClient struct{}

func (saramaClient) version(*testing.T) string {
	return "IBM/sarama " + moduleVersion("github.com/IBM/sarama") + " (config.Version default " + sarama.NewConfig().Version.String() + ")"
}

func (saramaClient) produce(t *testing.T, addr string, recs []record) {
	cfg := sarama.NewConfig()
	cfg.Producer.Return.Successes = true          // required by SyncProducer
	cfg.Producer.RequiredAcks = sarama.WaitForAll // Sarama's default is WaitForLocal (acks=1)
	p, err := sarama.NewSyncProducer([]string{addr}, cfg)
	if err != nil {
		t.Fatalf("sarama producer: %v", err)
	}
	defer p.Close()
	msgs := make([]*sarama.ProducerMessage, len(recs))
	for i, r := range recs {
		msgs[i] = &sarama.ProducerMessage{Topic: topic, Key: sarama.StringEncoder(r.key), Value: sarama.StringEncoder(r.value)}
	}
	if err := p.SendMessages(msgs); err != nil {
		t.Fatalf("sarama produce: %v", err)
	}
}

type saramaHandler struct {
	name string
	out  chan<- consumed
}

func (saramaHandler) Setup(sarama.ConsumerGroupSession) error   { return nil }
func (saramaHandler) Cleanup(sarama.ConsumerGroupSession) error { return nil }
func (h saramaHandler) ConsumeClaim(s sarama.ConsumerGroupSession, c sarama.ConsumerGroupClaim) error {
	for msg := range c.Messages() {
		h.out <- consumed{h.name, msg.Partition, msg.Offset, string(msg.Key)}
		s.MarkMessage(msg, "")
	}
	return nil
}

func (saramaClient) startMember(t *testing.T, addr, name string, out chan<- consumed) member {
	cfg := sarama.NewConfig()
	cfg.ClientID = name
	cfg.Consumer.Offsets.Initial = sarama.OffsetOldest
	g, err := sarama.NewConsumerGroup([]string{addr}, group, cfg)
	if err != nil {
		t.Fatalf("sarama group: %v", err)
	}
	return startGoMember(t, func(ctx context.Context) {
		for ctx.Err() == nil {
			if err := g.Consume(ctx, []string{topic}, saramaHandler{name, out}); err != nil && !errors.Is(err, sarama.ErrClosedConsumerGroup) {
				t.Logf("%s consume: %v", name, err)
			}
		}
	}, func(t *testing.T) {
		if err := g.Close(); err != nil { // commits marked offsets, leaves
			t.Errorf("%s close: %v", name, err)
		}
	})
}

func TestSarama(t *testing.T) { runScenario(t, saramaClient{}) }

// --- segmentio/kafka-go ---

type kafkaGo struct{}

func (kafkaGo) version(*testing.T) string {
	return "segmentio/kafka-go " + moduleVersion("github.com/segmentio/kafka-go")
}

func (kafkaGo) produce(t *testing.T, addr string, recs []record) {
	// A transport of our own so that its connection pool can be closed
	// (the default one lives for the whole process).
	tr := &kafka.Transport{}
	defer tr.CloseIdleConnections()
	// RequireAll: the Writer's default is RequireNone (acks=0), with which
	// WriteMessages returns once the batches are written to the socket,
	// before the broker appended them (TestKafkaGoCompaction once read
	// the log end while most of the records were still on their way).
	w := &kafka.Writer{Addr: kafka.TCP(addr), Topic: topic, Transport: tr, RequiredAcks: kafka.RequireAll}
	defer w.Close()
	msgs := make([]kafka.Message, len(recs))
	for i, r := range recs {
		msgs[i] = kafka.Message{Key: []byte(r.key), Value: []byte(r.value)}
	}
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	if err := w.WriteMessages(ctx, msgs...); err != nil {
		t.Fatalf("kafka-go produce: %v", err)
	}
}

func (kafkaGo) startMember(t *testing.T, addr, name string, out chan<- consumed) member {
	r := kafka.NewReader(kafka.ReaderConfig{Brokers: []string{addr}, GroupID: group, Topic: topic,
		Dialer: &kafka.Dialer{ClientID: name, Timeout: 10 * time.Second}})
	return startGoMember(t, func(ctx context.Context) {
		for {
			m, err := r.FetchMessage(ctx)
			if err != nil {
				if ctx.Err() == nil && !strings.Contains(err.Error(), "closed") {
					t.Errorf("%s fetch: %v", name, err)
				}
				return
			}
			out <- consumed{name, int32(m.Partition), m.Offset, string(m.Key)}
			if err := r.CommitMessages(ctx, m); err != nil && ctx.Err() == nil {
				t.Errorf("%s commit: %v", name, err)
			}
		}
	}, func(t *testing.T) {
		if err := r.Close(); err != nil { // leaves the group
			t.Errorf("%s close: %v", name, err)
		}
	})
}

func TestKafkaGo(t *testing.T) { runScenario(t, kafkaGo{}) }
