package store

import (
	"encoding/json"
	"maps"
	"slices"

	"github.com/sparecap/sparecap/internal/bound"
	"github.com/sparecap/sparecap/internal/domain"
)

// maxLabelsText bounds a span's labels as stored.
const maxLabelsText = 16 << 10

// LabelsText is labels as every backend stores them: JSON, empty for
// none; at most domain.MaxWorkLabels of them, the first by key, each cut
// to MaxText, while they fit maxLabelsText. A tenant's labels bound what
// is kept of them: they never fail the write of the fleet's spans.
func LabelsText(labels map[string]string) string {
	if len(labels) == 0 {
		return ""
	}
	cut := make(map[string]string, min(len(labels), domain.MaxWorkLabels))
	size := 2
	for _, k := range slices.Sorted(maps.Keys(labels)) {
		k2, v := bound.Text(k, MaxText), bound.Text(labels[k], MaxText)
		// A JSON string takes at most 6 bytes a byte escaped, and quotes.
		if len(cut) == domain.MaxWorkLabels || size+6*(len(k2)+len(v))+6 > maxLabelsText {
			break
		}
		cut[k2], size = v, size+6*(len(k2)+len(v))+6
	}
	b, _ := json.Marshal(cut) // strings always encode
	return string(b)
}
