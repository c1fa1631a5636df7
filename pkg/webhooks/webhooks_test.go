package webhooks

import (
	"errors"
	"net/http"
	"strconv"
	"strings"
	"testing"
	"time"
)

// The reference vector of the Standard Webhooks specification (the same
// secret, ID, timestamp and body give the same signature in every
// conforming library): sparecap's deliveries verify with any of them.
const (
	refSecret = "whsec_MfKQ9r8GKYqrTwjUPD8ILPZIo2LaLaSw"
	refID     = "msg_p5jXN8AQM9LWM0D4loKWxJek"
	refTS     = 1614265330
	refBody   = `{"test": 2432232314}`
	refSig    = "v1,g0hM9SsE+OTPJTGt/tmIKtSyZlE3uFJELVlNIOLJ1OE="
)

func headers(id string, ts int64, sigs ...string) http.Header {
	h := http.Header{}
	h.Set(HeaderID, id)
	h.Set(HeaderTimestamp, strconv.FormatInt(ts, 10))
	h.Set(HeaderSignature, strings.Join(sigs, " "))
	return h
}

func TestSignMatchesTheStandardWebhooksVector(t *testing.T) {
	got, err := Sign(refSecret, refID, time.Unix(refTS, 0), []byte(refBody))
	if err != nil || got != refSig {
		t.Fatalf("Sign = %q, %v; want %q", got, err, refSig)
	}
	if err := Verify(refSecret, headers(refID, refTS, refSig), []byte(refBody), time.Unix(refTS+10, 0)); err != nil {
		t.Fatalf("Verify of the reference vector: %v", err)
	}
}

// TestVerifyDetectsForgeries: a wrong secret, a changed body, ID or
// timestamp, a missing header or an unknown scheme never verify.
func TestVerifyDetectsForgeries(t *testing.T) {
	now := time.Unix(refTS, 0)
	other, _ := NewSecret()
	forged, _ := Sign(other, refID, now, []byte(refBody))
	cases := []struct {
		name   string
		secret string
		h      http.Header
		body   string
		want   error
	}{
		{"wrong secret", other, headers(refID, refTS, refSig), refBody, ErrSignature},
		{"signed with another secret", refSecret, headers(refID, refTS, forged), refBody, ErrSignature},
		{"body changed", refSecret, headers(refID, refTS, refSig), `{"test": 2432232315}`, ErrSignature},
		{"body re-encoded", refSecret, headers(refID, refTS, refSig), `{"test":2432232314}`, ErrSignature},
		{"id changed", refSecret, headers("msg_other", refTS, refSig), refBody, ErrSignature},
		{"timestamp changed", refSecret, headers(refID, refTS+1, refSig), refBody, ErrSignature},
		{"v2 scheme only", refSecret, headers(refID, refTS, "v2,"+strings.TrimPrefix(refSig, "v1,")), refBody, ErrSignature},
		{"no signature", refSecret, headers(refID, refTS), refBody, ErrHeaders},
		{"no id", refSecret, headers("", refTS, refSig), refBody, ErrHeaders},
		{"not a secret", "MfKQ9r8GKYqrTwjUPD8ILPZIo2LaLaSw", headers(refID, refTS, refSig), refBody, ErrSecret},
		{"secret not base64", "whsec_not base64!", headers(refID, refTS, refSig), refBody, ErrSecret},
	}
	for _, c := range cases {
		if err := Verify(c.secret, c.h, []byte(c.body), now); !errors.Is(err, c.want) {
			t.Errorf("%s: Verify = %v; want %v", c.name, err, c.want)
		}
	}
	bad := headers(refID, refTS, refSig)
	bad.Set(HeaderTimestamp, "yesterday")
	if err := Verify(refSecret, bad, []byte(refBody), now); !errors.Is(err, ErrHeaders) {
		t.Errorf("a timestamp that is no number: %v", err)
	}
}

// TestVerifyRefusesOldAndFutureTimestamps: a delivery replayed later than
// the tolerance, or dated ahead by more, is refused though its signature
// is right.
func TestVerifyRefusesOldAndFutureTimestamps(t *testing.T) {
	h, body := headers(refID, refTS, refSig), []byte(refBody)
	signed := time.Unix(refTS, 0)
	for _, d := range []time.Duration{-DefaultTolerance, 0, DefaultTolerance} {
		if err := Verify(refSecret, h, body, signed.Add(d)); err != nil {
			t.Errorf("at signing time %+v: %v", d, err)
		}
	}
	for _, d := range []time.Duration{-DefaultTolerance - time.Second, DefaultTolerance + time.Second, time.Hour} {
		if err := Verify(refSecret, h, body, signed.Add(d)); !errors.Is(err, ErrTimestamp) {
			t.Errorf("at signing time %+v: %v; want ErrTimestamp", d, err)
		}
	}
	if err := VerifyWithin(refSecret, h, body, signed.Add(time.Hour), 2*time.Hour); err != nil {
		t.Errorf("within a tolerance of 2h: %v", err)
	}
}

// TestVerifyAcceptsAnyOfSeveralSignatures: during a rotation a delivery
// carries a signature by each secret; a receiver holding either verifies.
func TestVerifyAcceptsAnyOfSeveralSignatures(t *testing.T) {
	now := time.Unix(1_800_000_000, 0)
	oldSecret, _ := NewSecret()
	newSecret, _ := NewSecret()
	body := []byte(`{"specversion":"1.0"}`)
	a, _ := Sign(newSecret, "ev-1", now, body)
	b, _ := Sign(oldSecret, "ev-1", now, body)
	h := headers("ev-1", now.Unix(), a, b)
	for _, s := range []string{oldSecret, newSecret} {
		if err := Verify(s, h, body, now); err != nil {
			t.Errorf("with one of the two secrets: %v", err)
		}
	}
	third, _ := NewSecret()
	if err := Verify(third, h, body, now); !errors.Is(err, ErrSignature) {
		t.Errorf("a third secret: %v", err)
	}
}

func TestNewSecret(t *testing.T) {
	a, err := NewSecret()
	if err != nil {
		t.Fatal(err)
	}
	b, _ := NewSecret()
	k, err := key(a)
	if err != nil || len(k) != 32 || a == b || !strings.HasPrefix(a, "whsec_") {
		t.Fatalf("secrets %q and %q (key %d bytes, %v)", a, b, len(k), err)
	}
}

// TestDedup: an ID handled is recognised within the window and forgotten
// after it; an ID not added (a delivery whose handling failed) is not;
// Max bounds the memory, oldest first.
func TestDedup(t *testing.T) {
	var d Dedup
	now := time.Unix(1_800_000_000, 0)
	if d.Seen("ev-1", now) {
		t.Fatal("seen before anything was added")
	}
	d.Add("ev-1", now)
	if !d.Seen("ev-1", now.Add(time.Minute)) || !d.Seen("ev-1", now.Add(24*time.Hour)) {
		t.Fatal("a handled ID is not recognised when it comes again")
	}
	if d.Seen("ev-2", now) {
		t.Fatal("an ID never added is seen")
	}
	if d.Seen("ev-1", now.Add(DefaultDedupWindow)) || d.Len() != 0 {
		t.Fatalf("remembered past the window (%d IDs)", d.Len())
	}
	small := Dedup{Max: 3, Window: time.Hour}
	for i := range 5 {
		small.Add("id-"+strconv.Itoa(i), now.Add(time.Duration(i)*time.Second))
	}
	if small.Len() != 3 || small.Seen("id-0", now.Add(5*time.Second)) || !small.Seen("id-4", now.Add(5*time.Second)) {
		t.Fatalf("Max 3: %d remembered, id-0 seen %v", small.Len(), small.Seen("id-0", now))
	}
	// Added again, an ID is kept from its latest add.
	small.Add("id-2", now.Add(50*time.Minute))
	if !small.Seen("id-2", now.Add(90*time.Minute)) || small.Seen("id-3", now.Add(90*time.Minute)) {
		t.Fatal("an ID added again is forgotten by its first add")
	}
}
