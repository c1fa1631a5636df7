// Package cli is the sparecap command line: a cobra command tree over the
// Go API client. The server and demo commands live elsewhere and are added
// to the root by NewRoot's caller.
package cli

import (
	"context"
	"errors"
	"fmt"
	"io/fs"
	"net/url"
	"os"
	"time"

	"github.com/spf13/cobra"

	"github.com/sparecap/sparecap/internal/client"
	"github.com/sparecap/sparecap/internal/clock"
)

// DefaultURL is where the CLI looks for the server when neither a flag, the
// environment nor the config file says otherwise.
const DefaultURL = "http://127.0.0.1:8407"

// env is what the commands take from the outside world, so tests can supply
// their own.
type env struct {
	clock  clock.Clock
	getenv func(string) string
	// loc is the time zone of times shown in tables.
	loc *time.Location
	// pollInterval is how often --wait polls the API.
	pollInterval time.Duration
}

func defaultEnv() env {
	return env{clock: clock.Real{}, getenv: os.Getenv, loc: time.Local, pollInterval: time.Second}
}

// state is the root's parsed persistent flags, shared by all commands.
type state struct {
	env
	url, token, configPath, output string
	// last is the command's API client, whose responses carry the server's
	// clock.
	last *client.Client
}

// now is the server's time when a response has told it, else the CLI's
// clock. A server run with --speed keeps a simulated clock; ages and
// countdowns are only right against it.
func (s *state) now() time.Time {
	if s.last != nil {
		if t, ok := s.last.ServerTime(); ok {
			return t
		}
	}
	return s.clock.Now()
}

// NewRoot returns the sparecap root command with every API command, plus
// extra (the server and demo commands). Errors are returned, printed by
// cobra as "Error: <message>"; usage is not printed on errors.
func NewRoot(extra ...*cobra.Command) *cobra.Command {
	return newRoot(defaultEnv(), extra...)
}

func newRoot(e env, extra ...*cobra.Command) *cobra.Command {
	root, _ := newRootState(e, extra...)
	return root
}

func newRootState(e env, extra ...*cobra.Command) (*cobra.Command, *state) {
	s := &state{env: e}
	root := &cobra.Command{
		Use:   "sparecap",
		Short: "Lend idle GPU machines to Kubernetes clusters as preemptible capacity",
		Long: `sparecap manages GPU clusters whose nodes come in two classes: standard
nodes, provisioned up front and never preempted, and preemptible nodes at half
price, filled toward a target as spare capacity appears and reclaimed with a
bounded 5-minute drain when it is needed elsewhere.

The CLI talks to a sparecap server. It finds it, in order of precedence, from
the --url and --token flags, the SPARECAP_URL and SPARECAP_TOKEN environment
variables, then the config file (written by the server on first start).`,
		Example: `  sparecap capacity
  sparecap clusters create --name my-cluster --region us-central-2 \
    --gpu-type RTX_6000_PCI --num-gpus 8 --num-preemptible-gpus 8
  sparecap clusters update <cluster-id> --num-preemptible-gpus 16 --wait
  sparecap events --cluster <cluster-id> --follow`,
		SilenceUsage:  true,
		SilenceErrors: false,
		// Validate -o before any command talks to the server, so a typo does
		// not create a cluster and then fail to print it.
		PersistentPreRunE: func(cmd *cobra.Command, args []string) error {
			return checkOutput(s.output)
		},
	}
	pf := root.PersistentFlags()
	pf.StringVar(&s.url, "url", "", "API server URL (env SPARECAP_URL, then config file; default "+DefaultURL+")")
	pf.StringVar(&s.token, "token", "", "API token (env SPARECAP_TOKEN, then config file)")
	pf.StringVar(&s.configPath, "config", "", "config file (default $SPARECAP_CONFIG, else $XDG_CONFIG_HOME/sparecap/config.yaml, else ~/.config/sparecap/config.yaml)")
	pf.StringVarP(&s.output, "output", "o", "table", "output format: table, json or yaml")

	root.AddCommand(
		newClustersCmd(s),
		newNodesCmd(s),
		newEventsCmd(s),
		newCapacityCmd(s),
		newStatsCmd(s),
		newAdviseCmd(s),
		newUsageCmd(s),
		newInvoiceCmd(s),
		newBudgetsCmd(s),
		newStorageCmd(s),
		newPricesCmd(s),
		newProjectsCmd(s),
		newTokensCmd(s),
		newMachinesCmd(s),
		newReservationsCmd(s),
		newWebhooksCmd(s),
		newSimulateCmd(s),
		newPlanCmd(s),
	)
	root.AddCommand(extra...)
	return root, s
}

// settings resolves the server URL and token: flag, then environment, then
// config file, then default. The config file is read only if needed, so a
// broken file does not get in the way of explicit flags.
func (s *state) settings(cmd *cobra.Command) (url, token string, err error) {
	fl := cmd.Root().PersistentFlags()
	url, token = s.url, s.token
	if !fl.Changed("url") {
		url = s.getenv("SPARECAP_URL")
	}
	if !fl.Changed("token") {
		token = s.getenv("SPARECAP_TOKEN")
	}
	if url == "" || token == "" {
		cfg, err := s.loadConfig(fl.Changed("config"))
		if err != nil {
			return "", "", err
		}
		if url == "" {
			url = cfg.URL
		}
		if token == "" {
			token = cfg.Token
		}
	}
	if url == "" {
		url = DefaultURL
	}
	return url, token, nil
}

func (s *state) configFile() string {
	if s.configPath != "" {
		return s.configPath
	}
	return client.ConfigPathFromEnv(s.getenv)
}

func (s *state) loadConfig(explicit bool) (client.Config, error) {
	path := s.configFile()
	if explicit {
		// A config file named on the command line must exist; the default
		// one is optional.
		if _, err := os.Stat(path); errors.Is(err, fs.ErrNotExist) {
			return client.Config{}, fmt.Errorf("config file %s does not exist", path)
		}
	}
	return client.LoadConfig(path)
}

// client returns an API client for the resolved settings.
func (s *state) client(cmd *cobra.Command) (*client.Client, error) {
	url, token, err := s.settings(cmd)
	if err != nil {
		return nil, err
	}
	c := client.New(url, token, client.WithUserAgent("sparecap-cli"), client.WithClock(s.clock))
	s.last = c
	return c, nil
}

// run adapts a command body to cobra: it builds the client and adds a hint
// to authentication errors.
func (s *state) run(fn func(cmd *cobra.Command, c *client.Client, args []string) error) func(*cobra.Command, []string) error {
	return func(cmd *cobra.Command, args []string) error {
		c, err := s.client(cmd)
		if err != nil {
			return err
		}
		err = fn(cmd, c, args)
		var ue *url.Error
		switch {
		case client.IsUnauthorized(err):
			return fmt.Errorf("%w\n(the token comes from --token, $SPARECAP_TOKEN or %s; admin commands need the admin token)", err, s.configFile())
		case errors.As(err, &ue) && !errors.Is(err, context.Canceled) && !errors.Is(err, context.DeadlineExceeded):
			return fmt.Errorf("%w\n(is the sparecap server running at %s? set it with --url, $SPARECAP_URL or %s)", err, c.BaseURL(), s.configFile())
		}
		return err
	}
}
