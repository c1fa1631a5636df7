// Command sqs-worker takes items from an SQS queue on a preemptible node.
// At the notice it stops receiving, gives the messages it holds back to
// the queue at once (ChangeMessageVisibility to 0: receivable again now,
// not at the end of their visibility timeout) and exits. An item whose
// work finishes is deleted, even if the notice came while it ran.
//
//	QUEUE_URL=https://sqs.us-east-1.amazonaws.com/123456789012/render WORKERS=4 sqs-worker
//
// The AWS configuration comes from the usual places (AWS_REGION, the
// credentials chain; AWS_ENDPOINT_URL_SQS for an SQS-compatible server).
package main

import (
	"context"
	"log"
	"os"
	"strconv"
	"sync"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/config"
	"github.com/aws/aws-sdk-go-v2/service/sqs"
	"github.com/aws/aws-sdk-go-v2/service/sqs/types"
	"github.com/sparecap/sparecap/pkg/preempt"
)

// receiveWait is SQS's long poll. A receive under way at the notice is
// not cut short (a message SQS hands out on a connection that closes is
// lost to its visibility timeout): the worker waits for it, up to this
// long, and gives back at once whatever it brings. So an idle worker
// exits within receiveWait of the notice; 20, SQS's longest, makes
// fewer requests.
const receiveWait = 5 // seconds

func main() {
	queueURL := os.Getenv("QUEUE_URL")
	workers, err := strconv.Atoi(os.Getenv("WORKERS"))
	if err != nil || workers < 1 {
		workers = 1
	}

	// ctx ends at the notice: SIGTERM, or the deadline from `sparecap run`
	// or the pod's annotation. preempt.Noticed(ctx) then has the deadline.
	ctx, stop := preempt.NotifyContext(context.Background(), preempt.Options{})
	defer stop()

	cfg, err := config.LoadDefaultConfig(ctx)
	if err != nil {
		log.Fatal(err)
	}
	client := sqs.NewFromConfig(cfg)

	var wg sync.WaitGroup
	for range workers {
		wg.Go(func() { work(ctx, client, queueURL) })
	}
	log.Printf("working %s with %d workers", queueURL, workers)
	<-ctx.Done()
	n, _ := preempt.Noticed(ctx)
	log.Printf("notice (%s): deadline %s; taking no more items, giving back the ones in hand", n.Source, n.Deadline.Format(time.RFC3339))

	done := make(chan struct{})
	go func() { wg.Wait(); close(done) }()
	select {
	case <-done:
		log.Print("exiting: every item is deleted or back in the queue")
	case <-time.After(time.Until(n.Deadline) - 5*time.Second):
		log.Print("exiting at the deadline: items still in hand come back after their visibility timeout")
	}
}

// work receives and handles one message at a time until the notice.
func work(ctx context.Context, client *sqs.Client, queueURL string) {
	for ctx.Err() == nil {
		rctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), (receiveWait+10)*time.Second)
		out, err := client.ReceiveMessage(rctx, &sqs.ReceiveMessageInput{
			QueueUrl:            &queueURL,
			MaxNumberOfMessages: 1,
			WaitTimeSeconds:     receiveWait,
		})
		cancel()
		if err != nil {
			log.Printf("receive: %v", err)
			select {
			case <-ctx.Done():
			case <-time.After(time.Second):
			}
			continue
		}
		for _, m := range out.Messages {
			handle(ctx, client, queueURL, m)
		}
	}
}

// handle works one message; it deletes it when the work is done, and
// gives it back at once when the notice interrupted the work.
func handle(ctx context.Context, client *sqs.Client, queueURL string, m types.Message) {
	id := aws.ToString(m.MessageId)
	if ctx.Err() != nil { // received after the notice
		giveBack(ctx, client, queueURL, m)
		return
	}
	log.Printf("took %s", id)
	err := process(ctx, aws.ToString(m.Body))
	switch {
	case err == nil:
		// Done: delete it, even if the notice came meanwhile.
		dctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), 30*time.Second)
		defer cancel()
		if _, err := client.DeleteMessage(dctx, &sqs.DeleteMessageInput{QueueUrl: &queueURL, ReceiptHandle: m.ReceiptHandle}); err != nil {
			log.Printf("done %s, but not deleted (it will come back): %v", id, err)
			return
		}
		log.Printf("done %s", id)
	case ctx.Err() != nil: // the notice interrupted it
		giveBack(ctx, client, queueURL, m)
	default:
		// The work failed: SQS gives the message back when its visibility
		// timeout ends, and its redrive policy counts the receive.
		log.Printf("failed %s: %v", id, err)
	}
}

// giveBack makes the message receivable now by any consumer.
func giveBack(ctx context.Context, client *sqs.Client, queueURL string, m types.Message) {
	by := time.Now().Add(10 * time.Second)
	if n, ok := preempt.Noticed(ctx); ok && n.Deadline.Before(by) {
		by = n.Deadline
	}
	bctx, cancel := context.WithDeadline(context.WithoutCancel(ctx), by)
	defer cancel()
	_, err := client.ChangeMessageVisibility(bctx, &sqs.ChangeMessageVisibilityInput{
		QueueUrl:          &queueURL,
		ReceiptHandle:     m.ReceiptHandle,
		VisibilityTimeout: 0,
	})
	if err != nil {
		log.Printf("could not give %s back (it comes back after its visibility timeout): %v", aws.ToString(m.MessageId), err)
		return
	}
	log.Printf("gave %s back to the queue", aws.ToString(m.MessageId))
}

// process is the work: replace it with yours, and have it return when
// ctx ends (the notice). This stand-in works as long as the message's
// body says ("90s").
func process(ctx context.Context, body string) error {
	d, err := time.ParseDuration(body)
	if err != nil {
		return err
	}
	select {
	case <-time.After(d):
		return nil
	case <-ctx.Done():
		return ctx.Err()
	}
}
