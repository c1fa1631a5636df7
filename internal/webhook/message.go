package webhook

import (
	"encoding/json"
	"strconv"
	"strings"
	"time"

	"github.com/sparecap/sparecap/internal/bound"
	"github.com/sparecap/sparecap/internal/domain"
	"github.com/sparecap/sparecap/internal/driver"
)

// Deliveries are CloudEvents 1.0 in structured mode: the whole event is
// the JSON body, sent with this content type.
const ContentType = "application/cloudevents+json"

// TypePrefix starts every CloudEvents type sparecap sends: the type of a
// lifecycle event is the prefix and its reason
// (dev.sparecap.PreemptionNotified).
const TypePrefix = "dev.sparecap."

// TestType is the type of the message sent by the API's test action.
const TestType = TypePrefix + "Test"

// TypeOf is the CloudEvents type of events of reason r.
func TypeOf(r domain.EventReason) string { return TypePrefix + string(r) }

// MessageID is the delivery ID of e: its ID, then its cursor (Seq).
// Event IDs are 48 random bits drawn from the controller's seeded
// source: unique in practice, but nothing enforces it (a run replayed
// from a seed draws the same ones again, and the store keeps no index of
// them). Seq is never handed out twice by a store, so the pair is unique
// by construction, and it stays the same on every retry.
func MessageID(e domain.Event) string { return e.ID + "-" + strconv.FormatInt(e.Seq, 10) }

// cloudEvent is the envelope (CloudEvents 1.0, JSON format).
type cloudEvent struct {
	SpecVersion     string    `json:"specversion"`
	ID              string    `json:"id"`
	Source          string    `json:"source"`
	Type            string    `json:"type"`
	Subject         string    `json:"subject,omitempty"`
	Time            time.Time `json:"time"`
	DataContentType string    `json:"datacontenttype"`
	Data            any       `json:"data"`
}

// EventData is the data of a lifecycle event's message.
type EventData struct {
	EventID     string     `json:"event_id"`
	Cursor      string     `json:"cursor"`
	ProjectID   string     `json:"project_id"`
	ClusterID   string     `json:"cluster_id"`
	ClusterType string     `json:"cluster_type"`
	NodeID      string     `json:"node_id,omitempty"`
	NodeName    string     `json:"node_name,omitempty"`
	Reason      string     `json:"reason"`
	Message     string     `json:"message"`
	Deadline    *time.Time `json:"deadline,omitempty"`
	// PreemptAt is set for PreemptionScheduled: when the node's notice
	// will come, its machine being booked (the event's deadline field is
	// then absent: the drain's deadline is a drain window after).
	PreemptAt *time.Time `json:"preempt_at,omitempty"`
	// Work is set for drain notices (PreemptionNotified, ScaledDown): the
	// tenant's work on the node when the message was made.
	Work *Work `json:"work,omitempty"`
}

// Work is what ran on a node being drained. A Kubernetes cluster's work
// is pods, a Slurm cluster's jobs; support pods (DaemonSets) are left
// out. When the cluster did not list it in time the message goes without
// it: Listed is false and Unavailable says why.
type Work struct {
	Listed bool   `json:"listed"`
	Pods   *[]Pod `json:"pods,omitempty"`
	Jobs   *[]Job `json:"jobs,omitempty"`
	// More is how many more pods or jobs were on the node than the
	// message lists (it lists at most maxWork).
	More        int    `json:"more,omitempty"`
	Unavailable string `json:"unavailable,omitempty"`
}

// Pod is a pod on the node.
type Pod struct {
	Namespace string `json:"namespace"`
	Name      string `json:"name"`
	UID       string `json:"uid,omitempty"`
}

// Job is a Slurm job with work on the node.
type Job struct {
	JobID   string `json:"job_id"`
	Name    string `json:"name"`
	Account string `json:"account,omitempty"`
}

// drainNotice reports whether events of reason r tell of a drain that
// has a deadline, whose message lists the node's work.
func drainNotice(e domain.Event) bool {
	return (e.Reason == domain.ReasonPreemptionNotified || e.Reason == domain.ReasonScaledDown) && e.NodeName != ""
}

// A message lists at most maxWork pods or jobs, each name cut to
// maxWorkName bytes (Kubernetes' own bound on a name): the tenant's
// cluster says what runs on a node, and a message is stored once per
// event and sent to every endpoint. A GPU node runs a handful.
const (
	maxWork     = 100
	maxWorkName = 253
)

// workOf turns what the driver listed into a message's Work.
func workOf(t domain.ClusterType, ws []driver.Work) *Work {
	w := &Work{Listed: true}
	name := func(s string) string { return bound.Text(s, maxWorkName) }
	if t == domain.ClusterSlurm {
		jobs := []Job{}
		for _, x := range ws {
			if len(jobs) == maxWork {
				w.More++
				continue
			}
			id, _, _ := strings.Cut(x.UID, ".") // the job ID, then its restart count
			jobs = append(jobs, Job{JobID: name(id), Name: name(x.Name), Account: name(x.Namespace)})
		}
		w.Jobs = &jobs
		return w
	}
	pods := []Pod{}
	for _, x := range ws {
		switch {
		case x.Support:
		case len(pods) == maxWork:
			w.More++
		default:
			pods = append(pods, Pod{Namespace: name(x.Namespace), Name: name(x.Name), UID: name(x.UID)})
		}
	}
	w.Pods = &pods
	return w
}

// eventMessage makes the message of e, an event about cluster c, with the
// work listed on its node (nil for an event that lists none; a Work with
// Listed false when the cluster did not answer).
func eventMessage(e domain.Event, c domain.Cluster, work *Work, now time.Time) (domain.WebhookMessage, error) {
	d := EventData{EventID: e.ID, Cursor: strconv.FormatInt(e.Seq, 10), ProjectID: c.ProjectID, ClusterID: e.ClusterID,
		ClusterType: string(c.Type), NodeID: e.NodeID, NodeName: e.NodeName, Reason: string(e.Reason), Message: e.Message, Work: work}
	if !e.Deadline.IsZero() {
		dl := e.Deadline.UTC()
		if e.Reason == domain.ReasonPreemptionScheduled {
			d.PreemptAt = &dl
		} else {
			d.Deadline = &dl
		}
	}
	id := MessageID(e)
	body, err := json.Marshal(cloudEvent{SpecVersion: "1.0", ID: id, Source: "/v1/clusters/" + e.ClusterID, Type: TypeOf(e.Reason),
		Subject: e.NodeName, Time: e.Timestamp.UTC(), DataContentType: "application/json", Data: d})
	if err != nil {
		return domain.WebhookMessage{}, err
	}
	return domain.WebhookMessage{ID: id, Type: TypeOf(e.Reason), EventID: e.ID, Body: body, CreatedAt: now}, nil
}

// TestData is the data of a test message.
type TestData struct {
	ProjectID  string `json:"project_id"`
	EndpointID string `json:"endpoint_id"`
	Message    string `json:"message"`
}

// NewTestMessage makes a test message for endpoint ep with ID id, at now
// (the API's test action).
func NewTestMessage(ep domain.WebhookEndpoint, id string, now time.Time) (domain.WebhookMessage, error) {
	body, err := json.Marshal(cloudEvent{SpecVersion: "1.0", ID: id, Source: "/v1/webhooks/" + ep.ID, Type: TestType,
		Subject: ep.Name, Time: now.UTC(), DataContentType: "application/json",
		Data: TestData{ProjectID: ep.ProjectID, EndpointID: ep.ID,
			Message: "a test delivery to webhook endpoint " + ep.Name + ": if it reached you and its signature verifies with the endpoint's secret, the endpoint is ready"}})
	if err != nil {
		return domain.WebhookMessage{}, err
	}
	return domain.WebhookMessage{ID: id, Type: TestType, Body: body, CreatedAt: now}, nil
}
