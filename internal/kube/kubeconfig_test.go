package kube

import (
	"errors"
	"strings"
	"testing"
)

// checkedKubeconfig has a current context with a token user, plus other
// entries that the cases below change: a kubeconfig is refused for what
// any of its entries holds, not only its current context's.
const checkedKubeconfig = `apiVersion: v1
kind: Config
clusters:
- name: prod
  cluster:
    server: https://k8s-api.tenant.internal:6443
    certificate-authority-data: Y2VydA==
- name: other
  cluster:
    server: https://other.tenant.internal:6443
contexts:
- name: prod
  context: {cluster: prod, user: sparecap}
- name: other
  context: {cluster: other, user: other-user}
users:
- name: sparecap
  user:
    token: kube-bearer-token
- name: other-user
  user:
    token: other-token
current-context: prod
`

func TestCheckKubeconfig(t *testing.T) {
	otherUser := "- name: other-user\n  user:\n    token: other-token\n"
	prodUser := "- name: sparecap\n  user:\n    token: kube-bearer-token\n"
	otherCluster := "    server: https://other.tenant.internal:6443\n"
	for _, tc := range []struct {
		name, from, to string
		want           string // "" if accepted
	}{
		{"token", "", "", ""},
		{"exec in the current context", prodUser,
			"- name: sparecap\n  user:\n    exec:\n      apiVersion: client.authentication.k8s.io/v1\n      command: /usr/bin/steal\n      args: [--token]\n      interactiveMode: Never\n",
			`user "sparecap" has an exec credential plugin (users[].user.exec)`},
		{"exec in another user", otherUser,
			"- name: other-user\n  user:\n    exec:\n      apiVersion: client.authentication.k8s.io/v1\n      command: /usr/bin/steal\n      interactiveMode: Never\n",
			`user "other-user" has an exec credential plugin (users[].user.exec)`},
		{"auth-provider", otherUser,
			"- name: other-user\n  user:\n    auth-provider:\n      name: oidc\n      config: {idp-issuer-url: https://issuer.example}\n",
			`user "other-user" has an auth-provider (users[].user.auth-provider)`},
		{"proxy-url", otherCluster,
			otherCluster + "    proxy-url: socks5://proxy.example:1080\n",
			`cluster "other" has a proxy-url (clusters[].cluster.proxy-url)`},
	} {
		t.Run(tc.name, func(t *testing.T) {
			kc := checkedKubeconfig
			if tc.from != "" {
				if !strings.Contains(kc, tc.from) {
					t.Fatalf("the test kubeconfig lacks %q", tc.from)
				}
				kc = strings.Replace(kc, tc.from, tc.to, 1)
			}
			err := CheckKubeconfig([]byte(kc), false)
			switch {
			case tc.want == "" && err != nil:
				t.Fatalf("refused: %v", err)
			case tc.want == "":
			case err == nil:
				t.Fatalf("accepted; want an error with %q", tc.want)
			case !errors.Is(err, ErrKubeconfigPlugin) || !strings.Contains(err.Error(), tc.want) ||
				!strings.Contains(err.Error(), "--allow-kubeconfig-plugins"):
				t.Fatalf("err = %v; want ErrKubeconfigPlugin with %q and the flag that allows it", err, tc.want)
			case strings.Contains(err.Error(), "steal") || strings.Contains(err.Error(), "proxy.example") || strings.Contains(err.Error(), "issuer.example"):
				t.Fatalf("the error shows the kubeconfig's command or address: %v", err)
			}
			// The server's flag allows them all.
			if err := CheckKubeconfig([]byte(kc), true); err != nil {
				t.Fatalf("with plugins allowed: %v", err)
			}
		})
	}
	for _, allow := range []bool{false, true} {
		if err := CheckKubeconfig([]byte("clusters: [\n"), allow); err == nil || !strings.Contains(err.Error(), "parse kubeconfig") {
			t.Errorf("allowPlugins=%v: a malformed kubeconfig: err = %v", allow, err)
		}
	}
}
