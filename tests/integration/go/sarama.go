// sarama.go — Shopify sarama 1.22 (Debian's golang-github-shopify-sarama-dev) producing and
// consuming in the old message formats, for test_kafka_go.py. Built offline like kafkago.go.
//
//	sarama produce VERSION BROKER TOPIC N CODEC   N messages k<i>/v<i> to partition 0, synchronously
//	sarama consume VERSION BROKER TOPIC N         the first N messages of partition 0
//
// VERSION is the Kafka version sarama is told the broker runs (0.8.2.0: Produce v0, message
// format v0; 0.10.0.0: Produce v2, format v1; 0.10.1.0: Fetch v3 and ListOffsets v1). CODEC is
// none, gzip, snappy or lz4. Consumed messages are printed as "offset key value timestamp-ms".
package main

import (
	"fmt"
	"os"
	"strconv"
	"time"

	"github.com/Shopify/sarama"
)

func die(f string, a ...interface{}) {
	fmt.Fprintf(os.Stderr, "sarama: "+f+"\n", a...)
	os.Exit(1)
}

func main() {
	if len(os.Args) < 6 {
		die("usage: sarama produce|consume VERSION BROKER TOPIC N [CODEC]")
	}
	v, err := sarama.ParseKafkaVersion(os.Args[2])
	if err != nil {
		die("version: %v", err)
	}
	broker, topic := os.Args[3], os.Args[4]
	n, err := strconv.Atoi(os.Args[5])
	if err != nil {
		die("count: %v", err)
	}
	cfg := sarama.NewConfig()
	cfg.Version = v
	cfg.ClientID = "strata-it-sarama"
	switch os.Args[1] {
	case "produce":
		cfg.Producer.Return.Successes = true
		cfg.Producer.RequiredAcks = sarama.WaitForAll
		cfg.Producer.Partitioner = sarama.NewManualPartitioner
		cfg.Producer.Flush.Messages = 10
		switch os.Args[6] {
		case "none":
			cfg.Producer.Compression = sarama.CompressionNone
		case "gzip":
			cfg.Producer.Compression = sarama.CompressionGZIP
		case "snappy":
			cfg.Producer.Compression = sarama.CompressionSnappy
		case "lz4":
			cfg.Producer.Compression = sarama.CompressionLZ4
		default:
			die("unknown codec %q", os.Args[6])
		}
		p, err := sarama.NewAsyncProducer([]string{broker}, cfg)
		if err != nil {
			die("producer: %v", err)
		}
		go func() {
			for i := 0; i < n; i++ {
				p.Input() <- &sarama.ProducerMessage{Topic: topic, Partition: 0,
					Key:       sarama.StringEncoder(fmt.Sprintf("k%d", i)),
					Value:     sarama.StringEncoder(fmt.Sprintf("v%d", i)),
					Timestamp: time.Unix(1700000000, int64(i)*int64(time.Millisecond))}
			}
		}()
		for i := 0; i < n; i++ {
			select {
			case <-p.Successes():
			case e := <-p.Errors():
				die("produce: %v", e.Err)
			case <-time.After(60 * time.Second):
				die("produce: no answer for message %d", i)
			}
		}
		if err := p.Close(); err != nil {
			die("close: %v", err)
		}
	case "consume":
		c, err := sarama.NewConsumer([]string{broker}, cfg)
		if err != nil {
			die("consumer: %v", err)
		}
		pc, err := c.ConsumePartition(topic, 0, sarama.OffsetOldest)
		if err != nil {
			die("consume partition: %v", err)
		}
		for i := 0; i < n; i++ {
			select {
			case m := <-pc.Messages():
				fmt.Printf("%d %s %s %d\n", m.Offset, m.Key, m.Value,
					m.Timestamp.UnixNano()/int64(time.Millisecond))
			case e := <-pc.Errors():
				die("consume: %v", e.Err)
			case <-time.After(60 * time.Second):
				die("consume: message %d of %d did not come", i, n)
			}
		}
		pc.Close()
		c.Close()
	default:
		die("unknown command %q", os.Args[1])
	}
}
