package api

import (
	"errors"
	"reflect"
	"strings"
	"testing"
	"unicode/utf8"

	jsonv2 "github.com/go-json-experiment/json"

	"github.com/sparecap/sparecap/internal/apiv1"
)

type inner struct {
	Count int `json:"count"`
}

type outer struct {
	Name   string         `json:"name"`
	In     inner          `json:"in"`
	Ptr    *inner         `json:"ptr"`
	List   []inner        `json:"list"`
	Labels map[string]int `json:"labels"`
	Any    any            `json:"any"`
	Skip   string         `json:"-"`
	Plain  string
}

// TestCheckKeys: repeated keys and keys in another case are refused at
// every depth, naming the field; maps and free-form values are checked for
// repeats only.
func TestCheckKeys(t *testing.T) {
	for _, tc := range []struct {
		body, field, msg string
	}{
		{`{"name":"a","in":{"count":1},"ptr":{"count":2},"list":[{"count":3}],"labels":{"X":1,"x":2},"any":{"A":1,"a":2},"Plain":"p"}`, "", ""},
		{`{"name":"a","name":"b"}`, "name", "more than once"},
		{`{"Name":"a"}`, "Name", `did you mean "name"`},
		{`{"plain":"a"}`, "plain", `did you mean "Plain"`},
		{`{"Skip":"a"}`, "Skip", "unknown field"},
		{`{"in":{"count":1,"count":2}}`, "in.count", "more than once"},
		{`{"in":{"COUNT":1}}`, "in.COUNT", "case-sensitive"},
		{`{"ptr":{"Count":1}}`, "ptr.Count", "case-sensitive"},
		{`{"list":[{"count":1},{"cOunt":1}]}`, "list.cOunt", "case-sensitive"},
		{`{"labels":{"a":1,"a":2}}`, "labels.a", "more than once"},
		{`{"any":[{"k":1,"k":1}]}`, "any.k", "more than once"},
	} {
		err := checkKeys([]byte(tc.body), reflect.TypeFor[*outer]())
		if tc.msg == "" {
			if err != nil {
				t.Errorf("%s: %v", tc.body, err)
			}
			continue
		}
		var bad *badRequest
		if !errors.As(err, &bad) || bad.field != tc.field || !strings.Contains(bad.msg, tc.msg) {
			t.Errorf("%s: got %v (field %v), want field %q and %q", tc.body, err, bad, tc.field, tc.msg)
		}
	}
}

// FuzzDecodeStrict holds decodeStrict to an independent strict decoder
// (go-json-experiment, case-sensitive, refusing repeated and unknown
// members): whatever decodeStrict accepts, it accepts too, with the same
// value; and whatever it refuses for a repeated or case-variant name,
// decodeStrict refuses.
func FuzzDecodeStrict(f *testing.F) {
	f.Add(createBody)
	f.Add(`{"cluster_name":"a","num_gpus":-8,"num_gpus":8}`)
	f.Add(`{"NUM_GPUS":8}`)
	f.Add(`{"num_gpus":8}{}`)
	f.Add(`{"cluster_name":"a\u0000","region":null}`)
	f.Fuzz(func(t *testing.T, body string) {
		var got apiv1.CreateClusterRequest
		err := decodeStrict(strings.NewReader(body), &got)
		var want apiv1.CreateClusterRequest
		refErr := jsonv2.Unmarshal([]byte(body), &want, jsonv2.RejectUnknownMembers(true))
		if err != nil {
			var bad *badRequest
			if !errors.As(err, &bad) || bad.msg == "" {
				t.Fatalf("error %v is not a client error with a message", err)
			}
			return
		}
		if !utf8.ValidString(body) {
			return // the reference refuses invalid UTF-8; encoding/json replaces it
		}
		if refErr != nil {
			t.Fatalf("decodeStrict accepted %q, which a strict decoder refuses: %v", body, refErr)
		}
		if !reflect.DeepEqual(got, want) {
			t.Fatalf("decodeStrict read %q as %+v, the strict decoder as %+v", body, got, want)
		}
	})
}
