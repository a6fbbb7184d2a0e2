// A KMS v2 plugin for the test bed only: the stand-in for a user's KMS (Vault, a cloud KMS) that
// karmada-apiserver reaches through a Unix socket when spec.apiServer.encryption.provider is
// KMSv2. It speaks the real KMS v2 gRPC API (k8s.io/kms/pkg/service, what every KMS v2 plugin
// serves) and wraps kube-apiserver's data-encryption keys with AES-256-GCM under a key-encryption
// key it reads from the environment (KMS_KEY, base64 of 32 bytes; the bed gives it from a
// Secret). The key id is the first 16 hex digits of the key's SHA-256, so a new key is a new id.
// The operator ships no KMS plugin: this one exists so the tests run a real plugin, not a mock.
package main

import (
	"context"
	"crypto/aes"
	"crypto/cipher"
	"crypto/rand"
	"crypto/sha256"
	"encoding/base64"
	"encoding/hex"
	"errors"
	"flag"
	"fmt"
	"log"
	"os"
	"os/signal"
	"syscall"
	"time"

	"k8s.io/kms/pkg/service"
)

type plugin struct {
	aead  cipher.AEAD
	keyID string
}

func newPlugin(key []byte) (*plugin, error) {
	if len(key) != 32 {
		return nil, fmt.Errorf("KMS_KEY: %d bytes, want 32", len(key))
	}
	block, err := aes.NewCipher(key)
	if err != nil {
		return nil, err
	}
	aead, err := cipher.NewGCM(block)
	if err != nil {
		return nil, err
	}
	sum := sha256.Sum256(key)
	return &plugin{aead: aead, keyID: hex.EncodeToString(sum[:8])}, nil
}

func (p *plugin) Encrypt(_ context.Context, _ string, data []byte) (*service.EncryptResponse, error) {
	nonce := make([]byte, p.aead.NonceSize())
	if _, err := rand.Read(nonce); err != nil {
		return nil, err
	}
	return &service.EncryptResponse{Ciphertext: p.aead.Seal(nonce, nonce, data, []byte(p.keyID)), KeyID: p.keyID}, nil
}

func (p *plugin) Decrypt(_ context.Context, _ string, req *service.DecryptRequest) ([]byte, error) {
	if req.KeyID != p.keyID {
		return nil, fmt.Errorf("key id %q is not this plugin's key (%s)", req.KeyID, p.keyID)
	}
	n := p.aead.NonceSize()
	if len(req.Ciphertext) < n {
		return nil, errors.New("ciphertext too short")
	}
	return p.aead.Open(nil, req.Ciphertext[:n], req.Ciphertext[n:], []byte(p.keyID))
}

func (p *plugin) Status(_ context.Context) (*service.StatusResponse, error) {
	return &service.StatusResponse{Version: "v2", Healthz: "ok", KeyID: p.keyID}, nil
}

func main() {
	socket := flag.String("listen", "/var/run/kmsplugin/kms.sock", "the Unix socket to serve on")
	timeout := flag.Duration("timeout", 3*time.Second, "the gRPC call timeout")
	flag.Parse()
	key, err := base64.StdEncoding.DecodeString(os.Getenv("KMS_KEY"))
	if err != nil {
		log.Fatalf("KMS_KEY: %v", err)
	}
	p, err := newPlugin(key)
	if err != nil {
		log.Fatal(err)
	}
	_ = os.Remove(*socket) // a socket left by the previous container of this pod
	svc := service.NewGRPCService(*socket, *timeout, p)
	go func() {
		stop := make(chan os.Signal, 1)
		signal.Notify(stop, syscall.SIGTERM, syscall.SIGINT)
		<-stop
		svc.Shutdown()
	}()
	log.Printf("KMS v2 plugin serving on %s, key id %s", *socket, p.keyID)
	if err := svc.ListenAndServe(); err != nil {
		log.Fatal(err)
	}
}
