// Command imdemo is the demo's application side: "produce" writes IM
// messages and their outbox rows in one transaction, as an application
// does; "watch" reads the topic back, shows records arriving in
// per-conversation seq_no order, and ends with a summary of the delivery
// check (exit 1 on any loss, reorder or split).
package main

import (
	"context"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"os"
	"sort"
	"strconv"
	"strings"
	"time"

	"github.com/cdc-outbox/cdc-outbox/internal/workload"
	"github.com/cdc-outbox/cdc-outbox/sink"
	"github.com/cdc-outbox/cdc-outbox/verify"
)

func main() {
	if len(os.Args) < 2 {
		fmt.Fprintln(os.Stderr, "usage: imdemo produce|watch [flags]")
		os.Exit(2)
	}
	var err error
	switch os.Args[1] {
	case "produce":
		err = produce(os.Args[2:])
	case "watch":
		err = watch(os.Args[2:])
	default:
		err = fmt.Errorf("unknown command %q", os.Args[1])
	}
	if err != nil {
		fmt.Fprintln(os.Stderr, "imdemo:", err)
		os.Exit(1)
	}
}

func env(k, def string) string {
	if v := os.Getenv(k); v != "" {
		return v
	}
	return def
}

// plan is what the producer committed: conversation → last seq_no.
type plan struct {
	Produced int             `json:"produced"`
	Last     map[int64]int64 `json:"last"`
}

func produce(args []string) error {
	fs := flag.NewFlagSet("produce", flag.ExitOnError)
	convs := fs.Int("conversations", 8, "number of conversations")
	count := fs.Int("count", 3000, "messages to write")
	maxTxn := fs.Int("max-txn", 20, "most messages per transaction")
	rate := fs.Int("rate", 1000, "messages per second")
	out := fs.String("plan", "plan.json", "file written at the end: what was committed")
	_ = fs.Parse(args)

	w, err := workload.Open(env("CDC_MYSQL_ADDR", "127.0.0.1:33306"), env("CDC_MYSQL_USER", "root"),
		env("CDC_MYSQL_PASSWORD", "root"), env("CDC_MYSQL_DB", "im"), "im_event_outbox", "im_message")
	if err != nil {
		return err
	}
	defer w.Close()
	// Continue the conversations' seq_no where earlier demo runs left them.
	p := workload.Generate(uint64(time.Now().UnixNano()), 0, *convs, *count, 1, *maxTxn, 160)
	start := time.Now()
	done := 0
	for _, txn := range p.Txns {
		for i := range txn {
			txn[i].Payload = []byte(fmt.Sprintf(`{"conversation_id":%d,"seq_no":%d,"from":%d,"to":%d,"text":"hello %d 👋","sent_at":%q}`,
				txn[i].ConversationID, txn[i].SeqNo, txn[i].SenderID, txn[i].ReceiverID, txn[i].SeqNo, time.Now().UTC().Format(time.RFC3339Nano)))
		}
		if err := w.Txn(txn, false); err != nil {
			return err
		}
		done += len(txn)
		if ahead := time.Duration(float64(done)/float64(*rate)*float64(time.Second)) - time.Since(start); ahead > 0 {
			time.Sleep(ahead)
		}
	}
	fmt.Printf("producer: committed %d messages in %d transactions over %d conversations in %s\n",
		done, len(p.Txns), *convs, time.Since(start).Round(time.Millisecond))
	b, _ := json.Marshal(plan{Produced: done, Last: p.Last})
	tmp := *out + ".tmp"
	if err := os.WriteFile(tmp, b, 0o644); err != nil {
		return err
	}
	return os.Rename(tmp, *out)
}

func watch(args []string) error {
	fs := flag.NewFlagSet("watch", flag.ExitOnError)
	topic := fs.String("topic", "im.events", "topic to read")
	planFile := fs.String("plan", "plan.json", "the producer's plan (waited for)")
	timeout := fs.Duration("timeout", 3*time.Minute, "give up after")
	_ = fs.Parse(args)
	brokers := strings.Split(env("CDC_KAFKA_BROKERS", "127.0.0.1:39092"), ",")

	ctx, cancel := context.WithTimeout(context.Background(), *timeout)
	defer cancel()
	cons := verify.NewConsumer(sink.Config{Brokers: brokers}, *topic)
	var all []verify.Record
	var p *plan
	lastSeq := map[string]int64{}
	shown := 0
	tick := time.NewTicker(time.Second)
	defer tick.Stop()
	for {
		recs, err := cons.Poll(ctx)
		if err != nil && ctx.Err() == nil {
			return err
		}
		all = append(all, recs...)
		for _, r := range recs {
			// Show the first records as they arrive, then one line a second.
			if shown < 12 {
				fmt.Printf("  ← %s partition %d offset %-5d key=%-3s seq_no=%-4d event_id=%s\n", r.Topic, r.Partition, r.Offset, r.Key, r.SeqNo, r.EventID)
				shown++
			}
			lastSeq[r.Key] = max(lastSeq[r.Key], r.SeqNo)
		}
		if p == nil {
			if b, err := os.ReadFile(*planFile); err == nil {
				p = &plan{}
				if err := json.Unmarshal(b, p); err != nil {
					return err
				}
			}
		}
		if p != nil {
			chk := verify.NewChecker(p.Last)
			chk.Add(all...)
			if chk.Complete() {
				return summary(p, chk.Report())
			}
		}
		select {
		case <-ctx.Done():
			if p == nil {
				return errors.New("the producer did not finish in time")
			}
			chk := verify.NewChecker(p.Last)
			chk.Add(all...)
			return summary(p, chk.Report())
		case <-tick.C:
			fmt.Printf("  … %d records so far; last seq_no per conversation: %s\n", len(all), progress(lastSeq))
		case <-time.After(100 * time.Millisecond):
		}
	}
}

func progress(last map[string]int64) string {
	keys := make([]string, 0, len(last))
	for k := range last {
		keys = append(keys, k)
	}
	sort.Slice(keys, func(i, j int) bool {
		a, _ := strconv.Atoi(keys[i])
		b, _ := strconv.Atoi(keys[j])
		return a < b
	})
	parts := make([]string, len(keys))
	for i, k := range keys {
		parts[i] = fmt.Sprintf("%s:%d", k, last[k])
	}
	return strings.Join(parts, " ")
}

func summary(p *plan, r verify.Report) error {
	fmt.Println()
	fmt.Println("summary")
	fmt.Printf("  produced (committed)        %d\n", p.Produced)
	fmt.Printf("  published (records read)    %d\n", r.Records)
	fmt.Printf("  distinct events             %d\n", r.Unique)
	fmt.Printf("  duplicates (same event id)  %d\n", r.Duplicates)
	fmt.Printf("  missing                     %d\n", r.Missing)
	fmt.Printf("  order violations            %d\n", r.Reordered)
	fmt.Printf("  conversations split         %d\n", r.Split)
	fmt.Printf("  conflicting duplicates      %d\n", r.Conflicts)
	for _, pr := range r.Problems {
		fmt.Println("  !", pr)
	}
	if !r.OK() {
		return errors.New("delivery check FAILED")
	}
	fmt.Println("  delivery check: OK (nothing lost, per-conversation order kept, duplicates carry the same event id)")
	return nil
}
