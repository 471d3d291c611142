package wapisim

import (
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/subtle"
	"crypto/tls"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/hex"
	"encoding/pem"
	"fmt"
	"math/big"
	"net"
	"net/http"
	"time"
)

// cookieName is the session cookie NIOS sets after a successful login; the
// go client keeps it in its cookie jar and sends it back.
const cookieName = "ibapauth"

// Permissions of a WAPI user. A user with neither flag may only read; a
// superuser may also create extensible attribute definitions, which NIOS
// reserves to superusers.
type Permissions struct {
	Write     bool
	Superuser bool
}

type user struct {
	password string
	perms    Permissions
}

// AddUser registers (or replaces) a user for HTTP basic authentication and,
// on TLS servers, client-certificate authentication.
func (s *Server) AddUser(name, password string, p Permissions) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.users[name] = user{password: password, perms: p}
}

// authenticate identifies the caller as NIOS does: by a client certificate
// the grid's CA signed (CN = user name), by HTTP basic credentials, or by
// the ibapauth cookie of an earlier login. It returns the user and, after a
// basic-auth login, the new session cookie value to set. Wrong basic
// credentials fail even with a valid cookie.
func (s *Server) authenticate(r *http.Request) (user, string, bool) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if r.TLS != nil && len(r.TLS.VerifiedChains) > 0 {
		if u, ok := s.users[r.TLS.VerifiedChains[0][0].Subject.CommonName]; ok {
			return u, "", true
		}
	}
	if name, pass, ok := r.BasicAuth(); ok {
		u, known := s.users[name]
		if !known || subtle.ConstantTimeCompare([]byte(u.password), []byte(pass)) != 1 {
			return user{}, "", false
		}
		return u, s.newSession(r, name, u), true
	}
	if ck, err := r.Cookie(cookieName); err == nil {
		if name, ok := s.sessions[ck.Value]; ok {
			if u, ok := s.users[name]; ok {
				return u, "", true
			}
		}
	}
	return user{}, "", false
}

// newSession issues an ibapauth value shaped like NIOS's
// ("ip=…,client=API,group=…,ctime=…,timeout=…,mtime=…,su=…,auth=LOCAL,user=…,<token>").
func (s *Server) newSession(r *http.Request, name string, u user) string {
	tok := make([]byte, 16)
	_, _ = rand.Read(tok)
	ip, _, _ := net.SplitHostPort(r.RemoteAddr)
	group, su := "api-group", 0
	if u.perms.Superuser {
		group, su = "admin-group", 1
	}
	now := time.Now().Unix()
	v := fmt.Sprintf("ip=%s,client=API,group=%s,ctime=%d,timeout=600,mtime=%d,su=%d,auth=LOCAL,user=%s,%s",
		ip, group, now, now, su, name, hex.EncodeToString(tok))
	s.sessions[v] = name
	return v
}

// authority is the simulator's certificate authority: it signs the TLS
// server's certificate and client certificates for users.
type authority struct {
	cert *x509.Certificate
	key  *ecdsa.PrivateKey
	pem  []byte
}

func newAuthority() *authority {
	key := mustKey()
	tmpl := &x509.Certificate{
		SerialNumber:          serial(),
		Subject:               pkix.Name{CommonName: "wapisim CA", Organization: []string{"Infoblox simulator"}},
		NotBefore:             time.Now().Add(-time.Hour),
		NotAfter:              time.Now().Add(24 * time.Hour),
		IsCA:                  true,
		BasicConstraintsValid: true,
		KeyUsage:              x509.KeyUsageCertSign | x509.KeyUsageDigitalSignature,
	}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, tmpl, &key.PublicKey, key)
	if err != nil {
		panic(err)
	}
	cert, _ := x509.ParseCertificate(der)
	return &authority{cert: cert, key: key, pem: pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: der})}
}

// issue signs a leaf certificate.
func (a *authority) issue(tmpl *x509.Certificate) (certPEM, keyPEM []byte) {
	key := mustKey()
	tmpl.SerialNumber = serial()
	tmpl.NotBefore, tmpl.NotAfter = time.Now().Add(-time.Hour), time.Now().Add(24*time.Hour)
	tmpl.KeyUsage = x509.KeyUsageDigitalSignature
	der, err := x509.CreateCertificate(rand.Reader, tmpl, a.cert, &key.PublicKey, a.key)
	if err != nil {
		panic(err)
	}
	kder, err := x509.MarshalECPrivateKey(key)
	if err != nil {
		panic(err)
	}
	return pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: der}),
		pem.EncodeToMemory(&pem.Block{Type: "EC PRIVATE KEY", Bytes: kder})
}

func (a *authority) serverCert() tls.Certificate {
	c, k := a.issue(&x509.Certificate{
		Subject:     pkix.Name{CommonName: "127.0.0.1"},
		IPAddresses: []net.IP{net.IPv4(127, 0, 0, 1), net.IPv6loopback},
		DNSNames:    []string{"localhost"},
		ExtKeyUsage: []x509.ExtKeyUsage{x509.ExtKeyUsageServerAuth},
	})
	cert, err := tls.X509KeyPair(c, k)
	if err != nil {
		panic(err)
	}
	return cert
}

// CACertPEM returns the PEM of the CA that signed the TLS server's
// certificate and the client certificates (nil for a plain-HTTP server).
func (s *Server) CACertPEM() []byte {
	if s.ca == nil {
		return nil
	}
	return append([]byte(nil), s.ca.pem...)
}

// IssueClientCert signs a client certificate with CN = username. A request
// presenting it is authenticated as that user, if the user exists. It
// panics on a plain-HTTP server, which has no CA.
func (s *Server) IssueClientCert(username string) (certPEM, keyPEM []byte) {
	if s.ca == nil {
		panic("wapisim: IssueClientCert needs a TLS server (NewTLS)")
	}
	return s.ca.issue(&x509.Certificate{
		Subject:     pkix.Name{CommonName: username},
		ExtKeyUsage: []x509.ExtKeyUsage{x509.ExtKeyUsageClientAuth},
	})
}

func mustKey() *ecdsa.PrivateKey {
	k, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		panic(err)
	}
	return k
}

func serial() *big.Int {
	n, err := rand.Int(rand.Reader, new(big.Int).Lsh(big.NewInt(1), 62))
	if err != nil {
		panic(err)
	}
	return n
}
