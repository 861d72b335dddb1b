// kafkago.go — segmentio kafka-go 0.2 (Debian's golang-github-segmentio-kafka-go-dev) against
// a broker, for test_kafka_go.py. kafka-go sends Produce v2 (message format v1), Fetch v2,
// Metadata v1, ListOffsets v1 and, in a group, FindCoordinator v0, JoinGroup v1, SyncGroup v0,
// Heartbeat v0, OffsetCommit v2, OffsetFetch v1. Built offline: GO111MODULE=off
// GOPATH=/usr/share/gocode.
//
//	kafkago produce BROKER TOPIC N CODEC   N messages k<i>/v<i> (CODEC none|gzip|snappy|lz4)
//	kafkago consume BROKER TOPIC PARTITION N   the first N messages of a partition
//	kafkago group BROKER TOPIC GROUP N         N messages as one group member
//
// Each consumed message is printed as "partition offset key value"; errors go to stderr with
// a non-zero exit.
package main

import (
	"context"
	"fmt"
	"os"
	"strconv"
	"time"

	kafka "github.com/segmentio/kafka-go"
	"github.com/segmentio/kafka-go/gzip"
	"github.com/segmentio/kafka-go/lz4"
	"github.com/segmentio/kafka-go/snappy"
)

func die(f string, a ...interface{}) {
	fmt.Fprintf(os.Stderr, "kafkago: "+f+"\n", a...)
	os.Exit(1)
}

func atoi(s string) int {
	n, err := strconv.Atoi(s)
	if err != nil {
		die("bad number %q", s)
	}
	return n
}

func codec(name string) kafka.CompressionCodec {
	switch name {
	case "none":
		return nil
	case "gzip":
		return gzip.NewCompressionCodec()
	case "snappy":
		return snappy.NewCompressionCodec()
	case "lz4":
		return lz4.NewCompressionCodec()
	}
	die("unknown codec %q", name)
	return nil
}

func read(r *kafka.Reader, n int) {
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	for i := 0; i < n; i++ {
		m, err := r.ReadMessage(ctx)
		if err != nil {
			die("read %d of %d: %v", i, n, err)
		}
		fmt.Printf("%d %d %s %s\n", m.Partition, m.Offset, m.Key, m.Value)
	}
}

func main() {
	if len(os.Args) < 5 {
		die("usage: kafkago produce|consume|group BROKER TOPIC ...")
	}
	broker, topic := os.Args[2], os.Args[3]
	switch os.Args[1] {
	case "produce":
		w := kafka.NewWriter(kafka.WriterConfig{
			Brokers:          []string{broker},
			Topic:            topic,
			BatchSize:        10,
			BatchTimeout:     10 * time.Millisecond,
			RequiredAcks:     -1,
			CompressionCodec: codec(os.Args[5]),
		})
		n := atoi(os.Args[4])
		msgs := make([]kafka.Message, n)
		for i := range msgs {
			msgs[i] = kafka.Message{Key: []byte(fmt.Sprintf("k%d", i)),
				Value: []byte(fmt.Sprintf("v%d", i))}
		}
		ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
		defer cancel()
		if err := w.WriteMessages(ctx, msgs...); err != nil {
			die("write: %v", err)
		}
		if err := w.Close(); err != nil {
			die("close: %v", err)
		}
	case "consume":
		r := kafka.NewReader(kafka.ReaderConfig{Brokers: []string{broker}, Topic: topic,
			Partition: atoi(os.Args[4]), MinBytes: 1, MaxBytes: 1 << 20,
			MaxWait: 100 * time.Millisecond})
		if err := r.SetOffset(0); err != nil {
			die("set offset: %v", err)
		}
		read(r, atoi(os.Args[5]))
		r.Close()
	case "group":
		r := kafka.NewReader(kafka.ReaderConfig{Brokers: []string{broker}, Topic: topic,
			GroupID: os.Args[4], MinBytes: 1, MaxBytes: 1 << 20,
			MaxWait: 100 * time.Millisecond})
		read(r, atoi(os.Args[5]))
		r.Close()
	default:
		die("unknown command %q", os.Args[1])
	}
}
