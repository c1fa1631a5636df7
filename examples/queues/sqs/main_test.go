package main

import (
	"fmt"
	"io"
	"net"
	"net/http"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/Admiral-Piett/goaws/app"
	"github.com/Admiral-Piett/goaws/app/gosqs"
	"github.com/Admiral-Piett/goaws/app/router"
	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/credentials"
	"github.com/aws/aws-sdk-go-v2/service/sqs"
	"github.com/aws/aws-sdk-go-v2/service/sqs/types"
	"github.com/sirupsen/logrus"

	"github.com/sparecap/sparecap/examples/queues/internal/workerproc"
)

// soon is how soon after the notice another consumer must receive an
// item the worker held: about a second, against the queue's visibility
// timeout of 10 minutes.
const soon = 2 * time.Second

// startGoaws serves goaws, an SQS-compatible server (SQS's query
// protocol), on loopback in this process and returns its endpoint.
func startGoaws(t *testing.T) string {
	t.Helper()
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatalf("the SQS server cannot listen: %v", err)
	}
	_, port, _ := net.SplitHostPort(l.Addr().String())
	logrus.SetOutput(io.Discard)
	app.CurrentEnvironment = app.Environment{
		Host: "127.0.0.1", Port: port, AccountID: "100010001000",
		QueueAttributeDefaults: app.EnvQueueAttributes{VisibilityTimeout: 30, MaximumMessageSize: 262144},
	}
	quit := make(chan struct{})
	go gosqs.PeriodicTasks(time.Second, quit) // visibility timeouts end, as in goaws's own server
	srv := &http.Server{Handler: router.New()}
	go srv.Serve(l)
	t.Cleanup(func() {
		srv.Close()
		close(quit)
	})
	return "http://" + l.Addr().String()
}

// TestReturnAtNotice runs the recipe against a real SQS-compatible
// server: an item that finishes is deleted; at the notice the two items
// in hand are received by another consumer within about a second, not
// after their visibility timeout, and the worker exits well before its
// deadline.
func TestReturnAtNotice(t *testing.T) {
	endpoint := startGoaws(t)
	ctx := t.Context()
	client := sqs.New(sqs.Options{
		BaseEndpoint: aws.String(endpoint),
		Region:       "us-east-1",
		Credentials:  credentials.NewStaticCredentialsProvider("test", "test", ""),
	})
	q, err := client.CreateQueue(ctx, &sqs.CreateQueueInput{
		QueueName:  aws.String(fmt.Sprintf("recipe-%d", time.Now().UnixNano())),
		Attributes: map[string]string{"VisibilityTimeout": "600"},
	})
	if err != nil {
		t.Fatalf("the SQS server does not answer: %v", err)
	}
	queueURL := aws.ToString(q.QueueUrl)
	send := func(body string) string {
		t.Helper()
		out, err := client.SendMessage(ctx, &sqs.SendMessageInput{QueueUrl: &queueURL, MessageBody: &body})
		if err != nil {
			t.Fatal(err)
		}
		return aws.ToString(out.MessageId)
	}
	counts := func() (visible, inFlight int) {
		t.Helper()
		out, err := client.GetQueueAttributes(ctx, &sqs.GetQueueAttributesInput{QueueUrl: &queueURL,
			AttributeNames: []types.QueueAttributeName{types.QueueAttributeNameApproximateNumberOfMessages, types.QueueAttributeNameApproximateNumberOfMessagesNotVisible}})
		if err != nil {
			t.Fatal(err)
		}
		visible, _ = strconv.Atoi(out.Attributes[string(types.QueueAttributeNameApproximateNumberOfMessages)])
		inFlight, _ = strconv.Atoi(out.Attributes[string(types.QueueAttributeNameApproximateNumberOfMessagesNotVisible)])
		return visible, inFlight
	}

	// Three workers: two will hold an item each at the notice, one will be
	// waiting in a receive.
	w := workerproc.Start(t, workerproc.Build(t, "."),
		"QUEUE_URL="+queueURL, "WORKERS=3", "SPARECAP_GRACE=15s",
		"AWS_ENDPOINT_URL_SQS="+endpoint, "AWS_REGION=us-east-1",
		"AWS_ACCESS_KEY_ID=test", "AWS_SECRET_ACCESS_KEY=test", "AWS_EC2_METADATA_DISABLED=true",
		"AWS_CONFIG_FILE=/dev/null", "AWS_SHARED_CREDENTIALS_FILE=/dev/null")

	// An item that finishes before the notice is deleted.
	short := send("100ms")
	w.WaitLine(regexp.MustCompile(`done `+regexp.QuoteMeta(short)+`$`), 30*time.Second)
	// Two items whose work takes far longer than the test.
	long := []string{send("1h"), send("1h")}
	for _, id := range long {
		w.WaitLine(regexp.MustCompile(`took `+regexp.QuoteMeta(id)+`$`), 30*time.Second)
	}
	// Both are in flight, and nothing is receivable: the short one is gone.
	if _, inFlight := counts(); inFlight != 2 {
		t.Fatalf("%d messages in flight before the notice, want the 2 long ones", inFlight)
	}
	if out, err := client.ReceiveMessage(ctx, &sqs.ReceiveMessageInput{QueueUrl: &queueURL, MaxNumberOfMessages: 10}); err != nil || len(out.Messages) > 0 {
		t.Fatalf("receivable before the notice: %d messages, %v", len(out.Messages), err)
	}

	notice := w.Notice()
	deadline := notice.Add(15 * time.Second) // SPARECAP_GRACE
	// An item sent after the notice. The third worker's receive, under way
	// at the notice, takes it or one of the items just given back, and must
	// give that back at once too; so the other consumer starts when the
	// worker has exited.
	long = append(long, send("1h"))
	exit, err := w.Exit(deadline)
	if err != nil {
		t.Fatalf("the worker exited with %v", err)
	}
	t.Logf("the worker exited %s after the notice (deadline %s after it)", exit.Sub(notice).Round(time.Millisecond), deadline.Sub(notice))
	gaveBack := 0
	for _, l := range w.Lines() {
		if strings.HasSuffix(l, " back to the queue") {
			gaveBack++
		}
	}
	t.Logf("the worker gave back %d messages: the 2 it held, and %d it received after the notice", gaveBack, gaveBack-2)
	for _, id := range long[:2] {
		w.WaitLine(regexp.MustCompile(`gave `+regexp.QuoteMeta(id)+` back to the queue$`), time.Second)
	}

	// Another consumer receives the three, soon.
	var got []string
	for len(got) < len(long) && time.Since(notice) < soon {
		out, err := client.ReceiveMessage(ctx, &sqs.ReceiveMessageInput{
			QueueUrl: &queueURL, MaxNumberOfMessages: 10, WaitTimeSeconds: 1, VisibilityTimeout: 600,
			AttributeNames: []types.QueueAttributeName{"ApproximateReceiveCount"},
		})
		if err != nil {
			t.Fatal(err)
		}
		for _, m := range out.Messages {
			id := aws.ToString(m.MessageId)
			if !slices.Contains(long, id) || slices.Contains(got, id) {
				t.Fatalf("received %s (%q), which is not one of the three long items, or twice", id, aws.ToString(m.Body))
			}
			got = append(got, id)
			t.Logf("%s received by another consumer %s after the notice (ApproximateReceiveCount %s as the server reports it)",
				id, time.Since(notice).Round(time.Millisecond), m.Attributes["ApproximateReceiveCount"])
			if _, err := client.DeleteMessage(ctx, &sqs.DeleteMessageInput{QueueUrl: &queueURL, ReceiptHandle: m.ReceiptHandle}); err != nil {
				t.Fatal(err)
			}
		}
	}
	if len(got) < len(long) {
		t.Fatalf("another consumer received %v within %s of the notice, want all of %v", got, soon, long)
	}

	// Nothing is left, visible or in flight: the short item was deleted, not
	// hidden for its visibility timeout.
	if visible, inFlight := counts(); visible != 0 || inFlight != 0 {
		t.Fatalf("%d visible and %d in flight left, want none", visible, inFlight)
	}
}
