package kube

import (
	"errors"
	"fmt"
	"sort"

	"k8s.io/client-go/tools/clientcmd"
)

// ErrKubeconfigPlugin is wrapped by CheckKubeconfig's error for a
// kubeconfig that would run code on, or send traffic from, the sparecap
// server.
var ErrKubeconfigPlugin = errors.New("kubeconfig uses a credential plugin or proxy")

// CheckKubeconfig refuses a kubeconfig that would make the sparecap server
// do more than talk to an API server with embedded credentials, unless
// allowPlugins is set (the server's --allow-kubeconfig-plugins flag):
//
//   - a user with an exec credential plugin (users[].user.exec): client-go
//     runs its command on the server's host, with the server's environment,
//     admin token included;
//   - a user with an auth-provider (users[].user.auth-provider): it runs
//     provider plugin code in the server, which fetches and refreshes
//     tokens from places the kubeconfig names;
//   - a cluster with a proxy-url (clusters[].cluster.proxy-url): the
//     cluster's traffic, credentials included, goes to that proxy.
//
// Every user and cluster in the file is checked, not only those of the
// current context, so no context switch can reach one. The error names the
// entry and the field, never the command or the proxy's address; it wraps
// ErrKubeconfigPlugin. A kubeconfig that does not parse is an error
// whatever allowPlugins says.
//
// It is called when a kubeconfig is attached and whenever a stored one is
// loaded, so one stored under another setting is refused too.
func CheckKubeconfig(kubeconfig []byte, allowPlugins bool) error {
	cfg, err := clientcmd.Load(kubeconfig)
	if err != nil {
		return fmt.Errorf("parse kubeconfig: %w", err)
	}
	if allowPlugins {
		return nil
	}
	const how = "; this server does not allow it (its --allow-kubeconfig-plugins flag would)"
	for _, name := range sortedKeys(cfg.AuthInfos) {
		user := cfg.AuthInfos[name]
		switch {
		case user == nil:
		case user.Exec != nil:
			return fmt.Errorf("%w: user %q has an exec credential plugin (users[].user.exec), which would run a command on the sparecap server with the server's environment; "+
				"use a token or an embedded client certificate instead%s", ErrKubeconfigPlugin, name, how)
		case user.AuthProvider != nil:
			return fmt.Errorf("%w: user %q has an auth-provider (users[].user.auth-provider), which would run provider plugin code in the sparecap server; "+
				"use a token or an embedded client certificate instead%s", ErrKubeconfigPlugin, name, how)
		}
	}
	for _, name := range sortedKeys(cfg.Clusters) {
		if c := cfg.Clusters[name]; c != nil && c.ProxyURL != "" {
			return fmt.Errorf("%w: cluster %q has a proxy-url (clusters[].cluster.proxy-url), which would send its traffic and credentials through that proxy; "+
				"remove it to reach the API server directly%s", ErrKubeconfigPlugin, name, how)
		}
	}
	return nil
}

func sortedKeys[V any](m map[string]V) []string {
	out := make([]string, 0, len(m))
	for k := range m {
		out = append(out, k)
	}
	sort.Strings(out)
	return out
}
