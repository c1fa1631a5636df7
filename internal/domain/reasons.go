package domain

// EventReasons are every reason a lifecycle event may have, in the order
// domain.go declares them: what a webhook endpoint may ask for by name.
// TestEventReasonsListsEveryReason keeps the list in step with the
// constants.
var EventReasons = []EventReason{
	ReasonNodeAdded,
	ReasonPreemptionNotified,
	ReasonNodeDrained,
	ReasonNodeRemoved,
	ReasonScaledDown,
	ReasonTargetUnfulfilled,
	ReasonTargetFulfilled,
	ReasonClusterDeleting,
	ReasonProvisionFailed,
	ReasonDeprovisionFailed,
	ReasonNodeLost,
	ReasonRegistrationFailed,
	ReasonCleanupFinished,
	ReasonPermissionMissing,
	ReasonDrainReasonKept,
	ReasonJobRequeued,
	ReasonWorkloadRequeued,
	ReasonNodeConverted,
	ReasonBudgetAlert,
	ReasonStorageQuotaReached,
	ReasonPreemptionScheduled,
	ReasonPreemptionCancelled,
}

// KnownReason reports whether r is one of EventReasons.
func KnownReason(r EventReason) bool {
	for _, k := range EventReasons {
		if k == r {
			return true
		}
	}
	return false
}

// UnfulfilledWaitingForLease: the cluster's share is held by other
// clusters' nodes inside their minimum lease (a pool's min_lease); nothing
// is provisioned for it until one ends. (The other reasons are in
// domain.go, which is at its length.)
const UnfulfilledWaitingForLease UnfulfilledReason = "WaitingForLease"
