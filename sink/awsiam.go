package sink

import (
	"context"
	"errors"
	"fmt"
	"net"
	"net/http"
	"regexp"
	"sync"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	v4 "github.com/aws/aws-sdk-go-v2/aws/signer/v4"
	awsconfig "github.com/aws/aws-sdk-go-v2/config"
	"github.com/aws/aws-sdk-go-v2/credentials"
	smithyhttp "github.com/aws/smithy-go/transport/http"
	"github.com/cdc-outbox/cdc-outbox/internal/secure"
	"github.com/segmentio/kafka-go/sasl"
	mskiam "github.com/segmentio/kafka-go/sasl/aws_msk_iam_v2"
)

// MechanismAWSMSKIAM is Amazon MSK's IAM access control (the SASL
// mechanism AWS_MSK_IAM of aws-msk-iam-auth): the client sends a SigV4
// presigned "kafka-cluster:Connect" request for the broker's host, signed
// with IAM credentials for the service "kafka-cluster" in the cluster's
// region. MSK offers it on its TLS listeners only (port 9098, 9198 public).
const MechanismAWSMSKIAM = "AWS_MSK_IAM"

// credentialsTimeout bounds getting credentials from the default chain.
const credentialsTimeout = 30 * time.Second

// awsRegion is the shape of an AWS region name (us-east-1, eu-central-2,
// us-gov-west-1, cn-north-1).
var awsRegion = regexp.MustCompile(`^[a-z]{2}(-[a-z]+)+-[0-9]+$`)

// hasAWS reports whether any AWS_MSK_IAM setting is set.
func (s SASL) hasAWS() bool {
	return s.AWSRegion != "" || s.AWSProfile != "" || s.AWSAccessKeyID != "" || s.AWSAccessKeyIDFile != "" ||
		s.AWSSecretAccessKey != "" || s.AWSSecretAccessKeyFile != "" || s.AWSSessionToken != "" || s.AWSSessionTokenFile != ""
}

// staticAWS reports whether s gives static keys (else the default chain).
func (s SASL) staticAWS() bool {
	return s.AWSAccessKeyID != "" || s.AWSAccessKeyIDFile != "" || s.AWSSecretAccessKey != "" || s.AWSSecretAccessKeyFile != ""
}

// validateAWS checks the AWS_MSK_IAM settings (mechanism AWS_MSK_IAM).
func (c *Config) validateAWS(bad func(field, format string, a ...any), secret func(field, v, file string)) {
	s := c.SASL
	if !c.TLS.Enabled {
		bad("sasl.mechanism", "AWS_MSK_IAM needs kafka.tls.enabled: true (MSK offers IAM access control on its TLS listeners, port 9098 or 9198)")
	}
	switch {
	case s.AWSRegion == "":
		bad("sasl.aws-region", "required with mechanism AWS_MSK_IAM: the MSK cluster's region, e.g. eu-west-1")
	case !awsRegion.MatchString(s.AWSRegion):
		bad("sasl.aws-region", "%q: want an AWS region name such as eu-west-1", s.AWSRegion)
	}
	if s.Username != "" || s.Password != "" || s.PasswordFile != "" || s.TokenFile != "" || s.TokenURL != "" {
		bad("sasl.username", "AWS_MSK_IAM signs with AWS credentials: remove kafka.sasl.username, password, token-file and token-url")
	}
	if s.staticAWS() {
		if s.AWSAccessKeyID == "" && s.AWSAccessKeyIDFile == "" {
			bad("sasl.aws-access-key-id", "required with kafka.sasl.aws-secret-access-key (or remove both to use the default AWS credential chain)")
		}
		if s.AWSSecretAccessKey == "" && s.AWSSecretAccessKeyFile == "" {
			bad("sasl.aws-secret-access-key", "required with kafka.sasl.aws-access-key-id (or kafka.sasl.aws-secret-access-key-file)")
		}
		if s.AWSProfile != "" {
			bad("sasl.aws-profile", "set either static keys (aws-access-key-id, aws-secret-access-key) or aws-profile, not both")
		}
	} else if s.AWSSessionToken != "" || s.AWSSessionTokenFile != "" {
		bad("sasl.aws-session-token", "a session token belongs to static keys: set kafka.sasl.aws-access-key-id and aws-secret-access-key too")
	}
	secret("aws-access-key-id", s.AWSAccessKeyID, s.AWSAccessKeyIDFile)
	secret("aws-secret-access-key", s.AWSSecretAccessKey, s.AWSSecretAccessKeyFile)
	secret("aws-session-token", s.AWSSessionToken, s.AWSSessionTokenFile)
}

// mskIAM is the AWS_MSK_IAM mechanism: each Start signs a new payload
// (kafka-go's aws_msk_iam_v2) with credentials that are either the static
// keys of kafka.sasl (their files re-read at each connection, for
// rotation) or the default AWS credential chain (environment, shared
// config and credentials files with aws-profile, web identity / IRSA, EKS
// Pod Identity, ECS, EC2 instance metadata), loaded at the first
// connection and cached by the SDK until they expire.
type mskIAM struct {
	s      SASL
	signer *v4.Signer
	now    func() time.Time // the signing time

	mu    sync.Mutex
	chain aws.CredentialsProvider
}

func newMSKIAM(s SASL) *mskIAM {
	return &mskIAM{s: s, signer: v4.NewSigner(), now: time.Now}
}

func (m *mskIAM) Name() string { return MechanismAWSMSKIAM }

// Start returns the signed payload: a JSON object with version
// 2020_10_22, host, user-agent, action kafka-cluster:Connect and the
// x-amz-* query parameters of the presigned request (algorithm,
// credential, date, expires 300 s, signedheaders host, security-token
// when there is one, signature). The broker's host comes from ctx
// (sasl.WithMetadata). A failure to get credentials is a *SecurityError.
func (m *mskIAM) Start(ctx context.Context) (sasl.StateMachine, []byte, error) {
	broker := "?"
	if md := sasl.MetadataFromContext(ctx); md != nil {
		broker = md.Host
	}
	// The chain may ask STS or the instance metadata service: not bound
	// by the connection's dial timeout (the SDK caches what it gets).
	cctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), credentialsTimeout)
	creds, err := m.credentials(cctx)
	cancel()
	if err != nil && credentialsUnavailable(err) {
		// STS or the instance metadata service slow, throttling or
		// down: the dial fails and is retried.
		return nil, nil, fmt.Errorf("AWS_MSK_IAM credentials for %s (retried): %w", broker, err)
	}
	if err != nil {
		return nil, nil, &SecurityError{Broker: broker, Setting: "kafka.sasl (AWS_MSK_IAM credentials)",
			Fix: "no AWS credentials: give kafka.sasl.aws-access-key-id and aws-secret-access-key(-file), or make the default chain find some (AWS_ACCESS_KEY_ID, AWS_PROFILE / kafka.sasl.aws-profile, an IAM role for the pod or instance)",
			Err: err}
	}
	mech := &mskiam.Mechanism{Signer: m.signer, Credentials: credentials.StaticCredentialsProvider{Value: creds},
		Region: m.s.AWSRegion, SignTime: m.now().UTC()}
	return mech.Start(ctx)
}

// credentialsUnavailable reports whether a failure to get AWS credentials
// is passing: a timeout (the lookup's own, or a network one) or an answer
// of 429 or 5xx from the service asked (STS, the instance metadata
// service, ECS). Anything else (no provider found credentials, a profile
// or file missing, access denied) no retry fixes.
func credentialsUnavailable(err error) bool {
	if errors.Is(err, context.DeadlineExceeded) {
		return true
	}
	if ne, ok := errors.AsType[net.Error](err); ok && ne.Timeout() {
		return true
	}
	if re, ok := errors.AsType[*smithyhttp.ResponseError](err); ok {
		code := re.HTTPStatusCode()
		return code == http.StatusTooManyRequests || code >= 500
	}
	return false
}

// credentials retrieves the credentials to sign with.
func (m *mskIAM) credentials(ctx context.Context) (aws.Credentials, error) {
	if m.s.staticAWS() {
		read := func(v, file, setting string) (string, error) {
			if file == "" {
				return v, nil
			}
			s, _, err := secure.ReadSecret(file, setting)
			return s, err
		}
		id, err := read(m.s.AWSAccessKeyID, m.s.AWSAccessKeyIDFile, "kafka.sasl.aws-access-key-id-file")
		if err != nil {
			return aws.Credentials{}, err
		}
		key, err := read(m.s.AWSSecretAccessKey, m.s.AWSSecretAccessKeyFile, "kafka.sasl.aws-secret-access-key-file")
		if err != nil {
			return aws.Credentials{}, err
		}
		tok, err := read(m.s.AWSSessionToken, m.s.AWSSessionTokenFile, "kafka.sasl.aws-session-token-file")
		if err != nil {
			return aws.Credentials{}, err
		}
		return credentials.NewStaticCredentialsProvider(id, key, tok).Retrieve(ctx)
	}
	m.mu.Lock()
	prov := m.chain
	if prov == nil {
		opts := []func(*awsconfig.LoadOptions) error{awsconfig.WithRegion(m.s.AWSRegion)}
		if m.s.AWSProfile != "" {
			opts = append(opts, awsconfig.WithSharedConfigProfile(m.s.AWSProfile))
		}
		cfg, err := awsconfig.LoadDefaultConfig(ctx, opts...)
		if err != nil {
			m.mu.Unlock()
			return aws.Credentials{}, fmt.Errorf("loading the AWS configuration: %w", err)
		}
		if cfg.Credentials == nil {
			m.mu.Unlock()
			return aws.Credentials{}, fmt.Errorf("the default AWS credential chain has no provider")
		}
		m.chain, prov = cfg.Credentials, cfg.Credentials
	}
	m.mu.Unlock()
	return prov.Retrieve(ctx)
}
