package allocator

import "github.com/sparecap/sparecap/internal/domain"

// scratch is a plan's working memory, kept by a Planner from one plan to
// the next: a partition planned after every change would otherwise
// allocate its indexes again each time (and feed the garbage collector a
// partition's worth per plan). Nothing a plan returns points into it.
type scratch struct {
	occ, ints, cStart, cNodes, fill []int32
	bools, gone                     []bool
	ranges                          []poolRange
	pools                           map[poolKey]*poolRange
	res                             []domain.Reservation
	projects                        map[string]string
	free, leaving                   []int32
	states                          []ClusterState
}

// grow returns *buf with n zeroed elements, reusing its array when it is
// large enough.
func grow[T any](buf *[]T, n int) []T {
	if cap(*buf) < n {
		*buf = make([]T, n)
		return *buf
	}
	*buf = (*buf)[:n]
	clear(*buf)
	return *buf
}

// poolMap returns an empty map of pools.
func (s *scratch) poolMap(n int) map[poolKey]*poolRange {
	if s.pools == nil {
		s.pools = make(map[poolKey]*poolRange, n)
	}
	clear(s.pools)
	return s.pools
}

// resProject maps each reservation to its project, made again only when
// the reservations are another slice.
func (s *scratch) resProject(rs []domain.Reservation) map[string]string {
	if s.projects != nil && same(s.res, rs) {
		return s.projects
	}
	s.res, s.projects = rs, make(map[string]string, len(rs))
	for i := range rs {
		s.projects[rs[i].ID] = rs[i].ProjectID
	}
	return s.projects
}
