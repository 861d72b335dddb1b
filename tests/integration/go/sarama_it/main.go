// sarama_it drives Go's sarama 1.22 (Debian golang-github-shopify-sarama-dev) against a
// broker for tests/integration/test_sarama.py. One mode per run; every result is one JSON
// object per line on stdout, errors on stderr with exit status 1.
//
//	-mode admin:   ClusterAdmin CreateTopic (with one topic config), ListTopics (Metadata v0
//	               and DescribeConfigs v0), DescribeConfig, DeleteTopic of a scratch topic.
//	-mode produce: an idempotent acks=all producer (InitProducerId, Produce v3), -n records
//	               with values "v<first+i>", one line per acknowledged record.
//	-mode consume: one member of a consumer group (FindCoordinator v0, JoinGroup v1, SyncGroup,
//	               Heartbeat and LeaveGroup v0, OffsetFetch v1, OffsetCommit v1, or v2 with
//	               -retention), one line per session set up and per record; stops, committing
//	               what it read, when its stdin closes.
//
// Built offline in GOPATH mode: GO111MODULE=off GOPATH=/usr/share/gocode.
package main

import (
	"context"
	"encoding/json"
	"flag"
	"fmt"
	"io"
	"io/ioutil"
	"log"
	"os"
	"sort"
	"sync"
	"time"

	"github.com/Shopify/sarama"
)

var out = json.NewEncoder(os.Stdout)
var outMu sync.Mutex

func emit(v map[string]interface{}) {
	outMu.Lock()
	defer outMu.Unlock()
	if err := out.Encode(v); err != nil {
		log.Fatalf("stdout: %v", err)
	}
}

func config(client string) *sarama.Config {
	c := sarama.NewConfig()
	c.Version = sarama.V2_1_0_0
	c.ClientID = client
	c.Metadata.Retry.Max = 10
	c.Metadata.Retry.Backoff = 200 * time.Millisecond
	c.Admin.Timeout = 20 * time.Second
	return c
}

func admin(brokers []string, topic string, partitions int) {
	ca, err := sarama.NewClusterAdmin(brokers, config("sarama-admin"))
	if err != nil {
		log.Fatalf("NewClusterAdmin: %v", err)
	}
	defer ca.Close()
	retention := "123456789"
	err = ca.CreateTopic(topic, &sarama.TopicDetail{NumPartitions: int32(partitions),
		ReplicationFactor: 1, ConfigEntries: map[string]*string{"retention.ms": &retention}}, false)
	if err != nil {
		log.Fatalf("CreateTopic: %v", err)
	}
	scratch := topic + "-scratch"
	if err = ca.CreateTopic(scratch, &sarama.TopicDetail{NumPartitions: 1, ReplicationFactor: 1}, false); err != nil {
		log.Fatalf("CreateTopic %s: %v", scratch, err)
	}
	topics, err := ca.ListTopics()
	if err != nil {
		log.Fatalf("ListTopics: %v", err)
	}
	d, ok := topics[topic]
	if !ok {
		log.Fatalf("ListTopics: %s missing", topic)
	}
	configs := map[string]string{}
	for k, v := range d.ConfigEntries {
		configs[k] = *v
	}
	_, scratchListed := topics[scratch]
	entries, err := ca.DescribeConfig(sarama.ConfigResource{Type: sarama.TopicResource, Name: topic,
		ConfigNames: []string{"retention.ms", "cleanup.policy"}})
	if err != nil {
		log.Fatalf("DescribeConfig: %v", err)
	}
	described := map[string]string{}
	for _, e := range entries {
		described[e.Name] = e.Value
	}
	if err = ca.DeleteTopic(scratch); err != nil {
		log.Fatalf("DeleteTopic: %v", err)
	}
	emit(map[string]interface{}{"event": "admin", "partitions": d.NumPartitions,
		"replication_factor": d.ReplicationFactor, "non_default_configs": configs,
		"scratch_listed": scratchListed, "described": described})
}

func produce(brokers []string, topic string, n, first int) {
	c := config("sarama-producer")
	c.Producer.Idempotent = true
	c.Producer.RequiredAcks = sarama.WaitForAll
	c.Producer.Retry.Max = 5
	c.Producer.Return.Successes = true
	c.Net.MaxOpenRequests = 1
	p, err := sarama.NewSyncProducer(brokers, c)
	if err != nil {
		log.Fatalf("NewSyncProducer: %v", err)
	}
	for i := 0; i < n; i++ {
		v := fmt.Sprintf("v%d", first+i)
		part, off, err := p.SendMessage(&sarama.ProducerMessage{Topic: topic,
			Key: sarama.StringEncoder(fmt.Sprintf("k%d", (first+i)%13)), Value: sarama.StringEncoder(v)})
		if err != nil {
			log.Fatalf("SendMessage %s: %v", v, err)
		}
		emit(map[string]interface{}{"event": "sent", "p": part, "o": off, "v": v})
	}
	if err = p.Close(); err != nil {
		log.Fatalf("producer Close: %v", err)
	}
}

type member struct{ name string }

func (m member) Setup(s sarama.ConsumerGroupSession) error {
	claims := map[string][]int32{}
	for t, ps := range s.Claims() {
		sort.Slice(ps, func(i, j int) bool { return ps[i] < ps[j] })
		claims[t] = ps
	}
	emit(map[string]interface{}{"event": "setup", "member": m.name, "member_id": s.MemberID(),
		"generation": s.GenerationID(), "claims": claims})
	return nil
}

func (m member) Cleanup(s sarama.ConsumerGroupSession) error { return nil }

func (m member) ConsumeClaim(s sarama.ConsumerGroupSession, c sarama.ConsumerGroupClaim) error {
	for msg := range c.Messages() {
		emit(map[string]interface{}{"event": "msg", "member": m.name, "p": msg.Partition,
			"o": msg.Offset, "v": string(msg.Value), "generation": s.GenerationID()})
		s.MarkMessage(msg, "")
	}
	return nil
}

func consume(brokers []string, topic, group, name string, retention time.Duration) {
	c := config("sarama-" + name)
	c.Consumer.Offsets.Initial = sarama.OffsetOldest
	c.Consumer.Offsets.Retention = retention
	c.Consumer.Offsets.CommitInterval = 200 * time.Millisecond
	c.Consumer.Return.Errors = true
	c.Consumer.Group.Session.Timeout = 10 * time.Second
	c.Consumer.Group.Heartbeat.Interval = 300 * time.Millisecond
	c.Consumer.Group.Rebalance.Timeout = 20 * time.Second
	c.Consumer.MaxWaitTime = 100 * time.Millisecond
	g, err := sarama.NewConsumerGroup(brokers, group, c)
	if err != nil {
		log.Fatalf("NewConsumerGroup: %v", err)
	}
	go func() {
		for err := range g.Errors() {
			log.Printf("consumer group error: %v", err)
		}
	}()
	ctx, cancel := context.WithCancel(context.Background())
	go func() { // the test closes stdin to stop the member
		io.Copy(ioutil.Discard, os.Stdin)
		cancel()
	}()
	for ctx.Err() == nil {
		if err := g.Consume(ctx, []string{topic}, member{name}); err != nil && ctx.Err() == nil {
			log.Printf("Consume: %v", err)
			time.Sleep(200 * time.Millisecond)
		}
	}
	if err := g.Close(); err != nil {
		log.Fatalf("consumer group Close: %v", err)
	}
	emit(map[string]interface{}{"event": "closed", "member": name})
}

func main() {
	mode := flag.String("mode", "", "admin | produce | consume")
	bootstrap := flag.String("bootstrap", "", "host:port")
	topic := flag.String("topic", "", "topic")
	partitions := flag.Int("partitions", 4, "admin: partitions of the topic")
	n := flag.Int("n", 0, "produce: records")
	first := flag.Int("first", 0, "produce: the first record's number")
	group := flag.String("group", "", "consume: group id")
	name := flag.String("name", "m", "consume: the member's name in the output")
	retention := flag.Duration("retention", 0, "consume: offset retention (0: OffsetCommit v1, else v2)")
	flag.Parse()
	log.SetFlags(log.Ltime | log.Lmicroseconds)
	brokers := []string{*bootstrap}
	switch *mode {
	case "admin":
		admin(brokers, *topic, *partitions)
	case "produce":
		produce(brokers, *topic, *n, *first)
	case "consume":
		consume(brokers, *topic, *group, *name, *retention)
	default:
		log.Fatalf("unknown -mode %q", *mode)
	}
}
