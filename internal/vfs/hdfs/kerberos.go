package hdfs

import (
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strings"

	krb "github.com/jcmturner/gokrb5/v8/client"
	"github.com/jcmturner/gokrb5/v8/config"
	"github.com/jcmturner/gokrb5/v8/credentials"
	"github.com/jcmturner/gokrb5/v8/keytab"
)

// ErrKerberos reports a Kerberos login that failed or could not be tried
// (no keytab or ticket cache, a bad krb5.conf, the KDC refusing).
var ErrKerberos = errors.New("hdfs: kerberos")

// Kerberos is how a client logs in to a Kerberized HDFS. The zero value
// logs in from the environment: the keytab in KRB5_CLIENT_KTNAME, else
// the ticket cache in KRB5CCNAME (else /tmp/krb5cc_UID).
type Kerberos struct {
	// Principal is the client's principal (name[/instance][@REALM]; the
	// realm defaults to krb5.conf's default_realm). Empty: the keytab's
	// first principal.
	Principal string
	// Keytab is the client's keytab file (default KRB5_CLIENT_KTNAME). A
	// keytab login logs in again before its ticket expires, so runs
	// outlive any ticket life.
	Keytab string
}

// Enabled reports whether k names a principal or keytab.
func (k Kerberos) Enabled() bool { return k.Principal != "" || k.Keytab != "" }

// krb5Conf loads KRB5_CONFIG (its first existing file) or /etc/krb5.conf.
func krb5Conf() (*config.Config, string, error) {
	paths := []string{"/etc/krb5.conf"}
	if v := os.Getenv("KRB5_CONFIG"); v != "" {
		paths = strings.Split(v, ":")
	}
	var firstErr error
	for _, p := range paths {
		if _, err := os.Stat(p); err != nil {
			if firstErr == nil {
				firstErr = err
			}
			continue
		}
		c, err := config.Load(p)
		if err != nil {
			return nil, p, fmt.Errorf("%w: reading krb5.conf %s (KRB5_CONFIG): %v", ErrKerberos, p, err)
		}
		return c, p, nil
	}
	return nil, "", fmt.Errorf("%w: no krb5.conf (KRB5_CONFIG=%q, /etc/krb5.conf): %v", ErrKerberos, os.Getenv("KRB5_CONFIG"), firstErr)
}

func stripFile(v string) string {
	if rest, ok := strings.CutPrefix(v, "FILE:"); ok {
		return rest
	}
	return v
}

// splitPrincipal parses name[/instance][@REALM].
func splitPrincipal(p, defaultRealm string) (name, realm string, err error) {
	name, realm, _ = strings.Cut(p, "@")
	if realm == "" {
		realm = defaultRealm
	}
	if name == "" || strings.ContainsAny(p, " \t\n") || strings.HasPrefix(name, "/") || strings.HasSuffix(name, "/") {
		return "", "", fmt.Errorf("%w: principal %q is not name[/instance][@REALM]", ErrKerberos, p)
	}
	if realm == "" {
		return "", "", fmt.Errorf("%w: principal %q has no realm and krb5.conf has no default_realm", ErrKerberos, p)
	}
	return name, realm, nil
}

// login returns a logged-in Kerberos client: from a keytab when k or
// KRB5_CLIENT_KTNAME names one (gokrb5 then logs in again before the TGT
// expires), else from the ticket cache (whose renewal is its owner's:
// kinit -R, k5start; it is read once, at connect).
func login(k Kerberos) (*krb.Client, error) {
	cfg, cfgPath, err := krb5Conf()
	if err != nil {
		return nil, err
	}
	ktPath := k.Keytab
	if ktPath == "" {
		ktPath = stripFile(os.Getenv("KRB5_CLIENT_KTNAME"))
	}
	if ktPath != "" {
		kt, err := keytab.Load(ktPath)
		if err != nil {
			return nil, fmt.Errorf("%w: reading keytab %s: %v", ErrKerberos, ktPath, err)
		}
		princ := k.Principal
		if princ == "" {
			if len(kt.Entries) == 0 {
				return nil, fmt.Errorf("%w: keytab %s holds no principal", ErrKerberos, ktPath)
			}
			e := kt.Entries[0].Principal
			princ = strings.Join(e.Components, "/") + "@" + e.Realm
		}
		name, realm, err := splitPrincipal(princ, cfg.LibDefaults.DefaultRealm)
		if err != nil {
			return nil, err
		}
		cl := krb.NewWithKeytab(name, realm, kt, cfg, krb.DisablePAFXFAST(true))
		if err := cl.Login(); err != nil {
			return nil, fmt.Errorf("%w: login of %s@%s with keytab %s (krb5.conf %s): %v", ErrKerberos, name, realm, ktPath, cfgPath, err)
		}
		return cl, nil
	}
	if k.Principal != "" {
		return nil, fmt.Errorf("%w: principal %s given without a keytab", ErrKerberos, k.Principal)
	}
	cc := stripFile(os.Getenv("KRB5CCNAME"))
	if cc == "" {
		cc = filepath.Join(os.TempDir(), fmt.Sprintf("krb5cc_%d", os.Getuid()))
	}
	ccache, err := credentials.LoadCCache(cc)
	if err != nil {
		return nil, fmt.Errorf("%w: no keytab (output.kerberos.keytab, KRB5_CLIENT_KTNAME) and no ticket cache at %s (KRB5CCNAME; kinit first): %v", ErrKerberos, cc, err)
	}
	cl, err := krb.NewFromCCache(ccache, cfg, krb.DisablePAFXFAST(true))
	if err != nil {
		return nil, fmt.Errorf("%w: ticket cache %s: %v", ErrKerberos, cc, err)
	}
	return cl, nil
}
