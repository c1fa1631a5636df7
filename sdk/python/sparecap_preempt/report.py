"""Tell sparecap when the job last committed a checkpoint.

The time goes to the pod's ``sparecap.dev/last-checkpoint`` annotation (one
JSON merge patch of that key, with the pod's own service account, which
needs ``patch`` on ``pods`` in its namespace: the Role in
docs/workloads.md). Among the nodes a reclaim must take, one whose work
checkpointed a moment ago goes before one whose work has run for hours
since. A report is a courtesy: one that fails changes nothing but that
choice. The Go SDK's ``preempt.PodReporter`` does the same.
"""

import datetime as _dt
import json
import os
import ssl
import urllib.error
import urllib.parse
import urllib.request
from typing import Optional

ANNOTATION_LAST_CHECKPOINT = "sparecap.dev/last-checkpoint"
# The units of work (epochs, steps) the job has completed: sparecap's cost
# allocation divides the job's cost by the most it reached, so work redone
# after a reclaim counts as cost.
ANNOTATION_PROGRESS = "sparecap.dev/progress"

_SERVICE_ACCOUNT = "/var/run/secrets/kubernetes.io/serviceaccount"
_TIMEOUT = 10.0


class ReportError(Exception):
    """A report the API server refused (``status``) or that did not get
    there (``status`` 0)."""

    def __init__(self, status: int, message: str):
        super().__init__(f"report the checkpoint: {status}: {message}" if status else f"report the checkpoint: {message}")
        self.status = status
        self.message = message


class PodReporter:
    """Writes checkpoint times to the pod's annotation.

    ``server`` is the API server's URL, ``token_file`` the bearer token (read
    at every report: a pod's projected token is rotated), ``context`` the
    TLS context that trusts the server's CA. :meth:`in_cluster` builds one
    from the pod's environment.
    """

    def __init__(self, server: str, token_file: str, namespace: str, pod: str,
                 context: Optional[ssl.SSLContext] = None):
        self.server = server.rstrip("/")
        self.token_file = token_file
        self.namespace = namespace
        self.pod = pod
        self.context = context

    @classmethod
    def in_cluster(cls) -> "PodReporter":
        """The reporter of the pod it runs in: POD_NAMESPACE and POD_NAME
        (from the Downward API), KUBERNETES_SERVICE_HOST and _PORT, and the
        service account's token and CA. Raises ReportError, saying what is
        missing, outside a pod set up for it."""
        ns, pod = os.environ.get("POD_NAMESPACE", ""), os.environ.get("POD_NAME", "")
        host, port = os.environ.get("KUBERNETES_SERVICE_HOST", ""), os.environ.get("KUBERNETES_SERVICE_PORT", "")
        if not ns or not pod:
            raise ReportError(0, "POD_NAMESPACE and POD_NAME are not set (give them from the Downward API: docs/workloads.md)")
        if not host or not port:
            raise ReportError(0, "KUBERNETES_SERVICE_HOST and KUBERNETES_SERVICE_PORT are not set: not in a Kubernetes pod")
        if ":" in host:
            host = "[" + host + "]"
        try:
            ctx = ssl.create_default_context(cafile=os.path.join(_SERVICE_ACCOUNT, "ca.crt"))
        except OSError as e:
            raise ReportError(0, f"the service account's CA: {e} (is automountServiceAccountToken off?)") from e
        return cls(f"https://{host}:{port}", os.path.join(_SERVICE_ACCOUNT, "token"), ns, pod, ctx)

    def report(self, at: _dt.datetime) -> None:
        """Writes ``at`` (an aware datetime; to the second, UTC) to the
        pod's annotation. Call it after :meth:`Store.save` with the
        checkpoint's ``time``. It gives up after 10 seconds."""
        if at.tzinfo is None:
            raise ValueError("report needs an aware datetime (with its time zone)")
        stamp = at.astimezone(_dt.timezone.utc).replace(microsecond=0).strftime("%Y-%m-%dT%H:%M:%SZ")
        self._patch(ANNOTATION_LAST_CHECKPOINT, stamp)

    def report_progress(self, units: int) -> None:
        """Writes ``units``, the units of work (epochs, steps) the job has
        completed, to the pod's ``sparecap.dev/progress``; after a restart,
        the count it resumed from. Each report is an API call: report now
        and then. It gives up after 10 seconds."""
        if not isinstance(units, int) or isinstance(units, bool) or units < 0:
            raise ValueError("report_progress needs a count of units, 0 or more")
        self._patch(ANNOTATION_PROGRESS, str(units))

    def _patch(self, key: str, value: str) -> None:
        with open(self.token_file) as f:
            token = f.read().strip()
        body = json.dumps({"metadata": {"annotations": {key: value}}}).encode()
        url = "%s/api/v1/namespaces/%s/pods/%s?fieldManager=sparecap-checkpoint" % (
            self.server, urllib.parse.quote(self.namespace, safe=""), urllib.parse.quote(self.pod, safe=""))
        req = urllib.request.Request(url, data=body, method="PATCH", headers={
            "Content-Type": "application/merge-patch+json", "Accept": "application/json",
            "Authorization": "Bearer " + token})
        try:
            with urllib.request.urlopen(req, timeout=_TIMEOUT, context=self.context) as resp:
                resp.read(4096)
        except urllib.error.HTTPError as e:
            text = e.read(4096).decode("utf-8", "replace")
            try:
                text = json.loads(text).get("message", text)
            except ValueError:
                pass
            raise ReportError(e.code, text[:200]) from None
        except (urllib.error.URLError, OSError) as e:
            raise ReportError(0, str(e)) from None
