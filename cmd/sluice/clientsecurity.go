package main

import (
	"github.com/spf13/pflag"

	"github.com/sluicehq/sluice/internal/kafka"
)

// securityFlags are the connection-security flags every command that
// connects to brokers takes (Kafka's client settings under their flag
// names), and --command-config, a Kafka client properties file. A flag given
// on the command line overrides the file.
type securityFlags struct {
	fs                                                                                    *pflag.FlagSet
	commandConfig, protocol, mechanism, username, passwordFile, ca, cert, key, serverName string
	insecure                                                                              bool
}

// addSecurityFlags registers the flags on fs (a command's flags, or the
// persistent flags of a command group).
func addSecurityFlags(fs *pflag.FlagSet) *securityFlags {
	f := &securityFlags{fs: fs}
	fs.StringVar(&f.commandConfig, "command-config", "", "Kafka client properties file (security.protocol, sasl.mechanism, sasl.jaas.config, ssl.truststore.location, ssl.keystore.location with type PEM); flags override it")
	fs.StringVar(&f.protocol, "security-protocol", "", "PLAINTEXT (default), SSL, SASL_PLAINTEXT or SASL_SSL")
	fs.StringVar(&f.mechanism, "sasl-mechanism", "", "PLAIN, SCRAM-SHA-256 or SCRAM-SHA-512 (with SASL_SSL or SASL_PLAINTEXT)")
	fs.StringVar(&f.username, "sasl-username", "", "SASL user name")
	fs.StringVar(&f.passwordFile, "sasl-password-file", "", "file whose first line is the SASL password")
	fs.StringVar(&f.ca, "tls-ca", "", "PEM file of the CAs that sign the brokers' certificates (default: the system's)")
	fs.StringVar(&f.cert, "tls-cert", "", "PEM client certificate, for brokers that require one (ssl.client.auth=required)")
	fs.StringVar(&f.key, "tls-key", "", "PEM private key of --tls-cert")
	fs.StringVar(&f.serverName, "tls-server-name", "", "name to check the brokers' certificates against instead of the host dialled")
	fs.BoolVar(&f.insecure, "tls-insecure-skip-verify", false, "do not check the brokers' certificates at all (tests only)")
	return f
}

// security returns the Security the flags and --command-config describe,
// checked; errors name the flag (or the property) at fault.
func (f *securityFlags) security() (kafka.Security, error) {
	var sec kafka.Security
	if f.commandConfig != "" {
		var err error
		if sec, err = kafka.ReadClientProperties(f.commandConfig); err != nil {
			return kafka.Security{}, err
		}
	}
	set := func(name string, dst *string, v string) {
		if f.fs.Changed(name) {
			*dst = v
		}
	}
	set("security-protocol", &sec.Protocol, f.protocol)
	set("sasl-mechanism", &sec.Mechanism, f.mechanism)
	set("sasl-username", &sec.Username, f.username)
	set("tls-ca", &sec.CA, f.ca)
	set("tls-cert", &sec.Cert, f.cert)
	set("tls-key", &sec.Key, f.key)
	set("tls-server-name", &sec.ServerName, f.serverName)
	if f.fs.Changed("tls-insecure-skip-verify") {
		sec.InsecureSkipVerify = f.insecure
	}
	if f.fs.Changed("sasl-password-file") {
		pw, err := kafka.ReadPasswordFile(f.passwordFile)
		if err != nil {
			return kafka.Security{}, kafka.Named(err, kafka.FlagName)
		}
		sec.Password = pw
	}
	if err := sec.Check(); err != nil {
		return kafka.Security{}, kafka.Named(err, kafka.FlagName)
	}
	if _, err := sec.TLSConfig(); err != nil {
		return kafka.Security{}, kafka.Named(err, kafka.FlagName)
	}
	return sec.Normalized(), nil
}
