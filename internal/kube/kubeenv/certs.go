package kubeenv

import (
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/rsa"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/hex"
	"encoding/pem"
	"math/big"
	"net"
	"os"
	"path/filepath"
	"time"
)

// secrets are generated once per Env and written to its directory, so a
// restarted kube-apiserver serves the same certificate and accepts the
// service-account tokens and admin token it issued before.
type secrets struct {
	caPEM    []byte // CA that signed the serving certificate; goes into kubeconfig
	token    string // static bearer token of the admin user (system:masters)
	certFile string
	keyFile  string
	saKey    string // RSA key: both signs and verifies service-account tokens
	tokens   string // --token-auth-file
	// servingDir holds tls.crt and tls.key, a serving certificate for
	// 127.0.0.1 signed by the CA, for the webhooks and metrics of the
	// controllers the Env runs besides the cluster's own (Kueue, JobSet):
	// the API server calls their webhooks at https://127.0.0.1:PORT with
	// the CA as caBundle.
	servingDir string
}

func generateSecrets(dir string) (*secrets, error) {
	caKey, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		return nil, err
	}
	now := time.Now()
	caTmpl := &x509.Certificate{
		SerialNumber:          big.NewInt(1),
		Subject:               pkix.Name{CommonName: "kubeenv-ca"},
		NotBefore:             now.Add(-time.Hour), // tolerate small clock skew
		NotAfter:              now.Add(10 * 365 * 24 * time.Hour),
		KeyUsage:              x509.KeyUsageCertSign | x509.KeyUsageDigitalSignature,
		BasicConstraintsValid: true,
		IsCA:                  true,
	}
	caDER, err := x509.CreateCertificate(rand.Reader, caTmpl, caTmpl, &caKey.PublicKey, caKey)
	if err != nil {
		return nil, err
	}
	ca, err := x509.ParseCertificate(caDER)
	if err != nil {
		return nil, err
	}

	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		return nil, err
	}
	tmpl := &x509.Certificate{
		SerialNumber: big.NewInt(2),
		Subject:      pkix.Name{CommonName: "kube-apiserver"},
		NotBefore:    caTmpl.NotBefore,
		NotAfter:     caTmpl.NotAfter,
		KeyUsage:     x509.KeyUsageDigitalSignature,
		ExtKeyUsage:  []x509.ExtKeyUsage{x509.ExtKeyUsageServerAuth},
		// The in-cluster names too, so the certificate is what a real one
		// looks like; only 127.0.0.1 is ever dialled.
		DNSNames:    []string{"localhost", "kubernetes", "kubernetes.default", "kubernetes.default.svc", "kubernetes.default.svc.cluster.local"},
		IPAddresses: []net.IP{net.IPv4(127, 0, 0, 1), net.IPv6loopback, net.IPv4(10, 96, 0, 1)},
	}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, ca, &key.PublicKey, caKey)
	if err != nil {
		return nil, err
	}
	keyDER, err := x509.MarshalECPrivateKey(key)
	if err != nil {
		return nil, err
	}
	// The controllers' serving certificate: loopback only, as the API
	// server dials their webhooks by URL.
	webhookKey, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		return nil, err
	}
	webhookTmpl := &x509.Certificate{
		SerialNumber: big.NewInt(3),
		Subject:      pkix.Name{CommonName: "kubeenv-webhooks"},
		NotBefore:    caTmpl.NotBefore,
		NotAfter:     caTmpl.NotAfter,
		KeyUsage:     x509.KeyUsageDigitalSignature,
		ExtKeyUsage:  []x509.ExtKeyUsage{x509.ExtKeyUsageServerAuth},
		DNSNames:     []string{"localhost"},
		IPAddresses:  []net.IP{net.IPv4(127, 0, 0, 1)},
	}
	webhookDER, err := x509.CreateCertificate(rand.Reader, webhookTmpl, ca, &webhookKey.PublicKey, caKey)
	if err != nil {
		return nil, err
	}
	webhookKeyDER, err := x509.MarshalECPrivateKey(webhookKey)
	if err != nil {
		return nil, err
	}
	saKey, err := rsa.GenerateKey(rand.Reader, 2048)
	if err != nil {
		return nil, err
	}
	tok := make([]byte, 16)
	if _, err := rand.Read(tok); err != nil {
		return nil, err
	}

	s := &secrets{
		caPEM:    pemBlock("CERTIFICATE", caDER),
		token:    hex.EncodeToString(tok),
		certFile: filepath.Join(dir, "apiserver.crt"),
		keyFile:  filepath.Join(dir, "apiserver.key"),
		saKey:    filepath.Join(dir, "sa.key"),
		tokens:   filepath.Join(dir, "tokens.csv"),

		servingDir: filepath.Join(dir, "serving-certs"),
	}
	if err := os.MkdirAll(s.servingDir, 0o700); err != nil {
		return nil, err
	}
	files := map[string][]byte{
		filepath.Join(dir, "ca.crt"): s.caPEM,
		// The chain lets clients that only trust the CA verify the leaf.
		s.certFile: append(pemBlock("CERTIFICATE", der), s.caPEM...),
		s.keyFile:  pemBlock("EC PRIVATE KEY", keyDER),
		s.saKey:    pemBlock("RSA PRIVATE KEY", x509.MarshalPKCS1PrivateKey(saKey)),
		// token,user,uid,"groups": system:masters bypasses RBAC entirely.
		s.tokens: []byte(s.token + `,admin,admin,"system:masters"` + "\n"),
		// The names controller-runtime's webhook and metrics servers read.
		filepath.Join(s.servingDir, "tls.crt"): append(pemBlock("CERTIFICATE", webhookDER), s.caPEM...),
		filepath.Join(s.servingDir, "tls.key"): pemBlock("EC PRIVATE KEY", webhookKeyDER),
	}
	for name, data := range files {
		if err := os.WriteFile(name, data, 0o600); err != nil {
			return nil, err
		}
	}
	return s, nil
}

func pemBlock(typ string, der []byte) []byte {
	return pem.EncodeToMemory(&pem.Block{Type: typ, Bytes: der})
}
