package sqlstore

import (
	"encoding/json"
	"testing"
	"unicode/utf8"
)

// FuzzLabelOf: reading one label from the stored JSON finds what decoding
// it all finds, whatever the labels hold.
func FuzzLabelOf(f *testing.F) {
	f.Add("team", "vision", "a", `x","team":"fake`)
	f.Add("team", `vi"s\ion`, "team2", "team")
	f.Add("k", "", "", "")
	f.Fuzz(func(t *testing.T, k1, v1, k2, v2 string) {
		m := map[string]string{k1: v1, k2: v2}
		b, err := json.Marshal(m)
		if err != nil {
			t.Skip()
		}
		var back map[string]string
		if err := json.Unmarshal(b, &back); err != nil {
			t.Fatal(err)
		}
		for _, k := range []string{k1, k2, "absent" + k1} {
			if !utf8.ValidString(k) {
				continue // stored keys are valid UTF-8 (Marshal replaced what was not); newSpanScan refuses others
			}
			want, wok := back[k]
			q, _ := json.Marshal(k)
			got, ok, err := labelOf(string(b), k, string(q))
			if err != nil || ok != wok || got != want {
				t.Fatalf("labelOf(%s, %q) = %q %v %v, want %q %v", b, k, got, ok, err, want, wok)
			}
		}
	})
}
