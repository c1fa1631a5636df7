package cli

import (
	"fmt"
	"text/tabwriter"
	"time"

	"github.com/spf13/cobra"

	"github.com/sparecap/sparecap/internal/apiv1"
	"github.com/sparecap/sparecap/internal/client"
)

func newTokensCmd(s *state) *cobra.Command {
	var project string
	cmd := &cobra.Command{
		Use:     "tokens",
		Aliases: []string{"token"},
		Short:   "List, create, revoke and rotate API tokens",
		Long: `Manage API tokens. Without --project-id a command works on the tokens of the
calling token's own scope: its project's, or, with an operator (admin)
token, the operator tokens. With --project-id an operator manages that
project's tokens.

A token's secret is shown once, when it is created or rotated; the server
keeps only its hash. Revoking a token stops it at once on every server, and
ends the console sessions signed in with it. Rotating makes a new token with
the same name and lifetime and revokes the old one.`,
		Example: `  sparecap tokens list
  sparecap tokens create --name ci --expires-in 720h
  sparecap tokens rotate tok-3f2a9c1d0b7e4a55
  sparecap tokens revoke tok-3f2a9c1d0b7e4a55
  sparecap tokens list --project-id team-ml     # operator`,
	}
	cmd.PersistentFlags().StringVar(&project, "project-id", "", "manage this project's tokens (operator token needed)")
	scope := func() client.TokenScope { return client.TokenScope{ProjectID: project} }

	cmd.AddCommand(
		newTokensListCmd(s, scope),
		newTokensCreateCmd(s, scope),
		newTokensRevokeCmd(s, scope),
		newTokensRotateCmd(s, scope),
	)
	return cmd
}

func newTokensListCmd(s *state, scope func() client.TokenScope) *cobra.Command {
	return &cobra.Command{
		Use:   "list",
		Short: "List tokens (never their secrets)",
		Long: `List tokens, oldest first, with their state (active, expired or revoked),
expiry and last use (recorded every few seconds). Secrets are never listed.`,
		Example: `  sparecap tokens list
  sparecap tokens list --project-id team-ml -o json`,
		Args: cobra.NoArgs,
		RunE: s.run(func(cmd *cobra.Command, c *client.Client, _ []string) error {
			list, err := c.ListTokens(cmd.Context(), scope())
			if err != nil {
				return fmt.Errorf("list tokens: %w", err)
			}
			return s.print(cmd.OutOrStdout(), list, func(tw *tabwriter.Writer) {
				row(tw, "ID", "NAME", "STATE", "CREATED", "EXPIRES", "LAST_USED")
				for _, t := range list.Tokens {
					row(tw, t.TokenID, t.Name, t.State, s.localTime(t.CreatedAt), s.optTime(t.ExpiresAt), s.optTime(t.LastUsedAt))
				}
			})
		}),
	}
}

func newTokensCreateCmd(s *state, scope func() client.TokenScope) *cobra.Command {
	var req apiv1.CreateTokenRequest
	var expiresAt string
	create := &cobra.Command{
		Use:   "create",
		Short: "Create a token and print it",
		Long: `Create a token and print it. It is shown only this once. Without --expires-in
or --expires-at it does not expire.`,
		Example: `  sparecap tokens create --name ci --expires-in 720h
  sparecap tokens create --name laptop --expires-at 2027-06-30T00:00:00Z`,
		Args: cobra.NoArgs,
		RunE: s.run(func(cmd *cobra.Command, c *client.Client, _ []string) error {
			r := req
			if expiresAt != "" {
				at, err := time.Parse(time.RFC3339, expiresAt)
				if err != nil {
					return fmt.Errorf("--expires-at %q: want a time like 2027-06-30T00:00:00Z", expiresAt)
				}
				r.ExpiresAt = &at
			}
			t, err := c.NewToken(cmd.Context(), scope(), r)
			if err != nil {
				return fmt.Errorf("create token: %w", err)
			}
			return s.printNewToken(cmd, t)
		}),
	}
	create.Flags().StringVar(&req.Name, "name", "", "the token's name (letters, digits, '_', '.', '-'; default \"token\")")
	create.Flags().StringVar(&req.ExpiresIn, "expires-in", "", "lifetime, e.g. 720h (default: never expires)")
	create.Flags().StringVar(&expiresAt, "expires-at", "", "expiry time, RFC 3339 (instead of --expires-in)")
	return create
}

func newTokensRevokeCmd(s *state, scope func() client.TokenScope) *cobra.Command {
	return &cobra.Command{
		Use:   "revoke <token-id>",
		Short: "Revoke a token: it stops working at once",
		Long: `Revoke a token. It stops working at once on every server; console sessions
signed in with it end and its event streams close. The last active operator
token cannot be revoked: create or rotate one first.`,
		Example: `  sparecap tokens revoke tok-3f2a9c1d0b7e4a55`,
		Args:    cobra.ExactArgs(1),
		RunE: s.run(func(cmd *cobra.Command, c *client.Client, args []string) error {
			t, err := c.RevokeToken(cmd.Context(), scope(), args[0])
			if err != nil {
				return fmt.Errorf("revoke token %s: %w", args[0], err)
			}
			return s.print(cmd.OutOrStdout(), t, func(tw *tabwriter.Writer) {
				row(tw, "Token:", t.TokenID)
				row(tw, "Name:", t.Name)
				row(tw, "State:", t.State)
			})
		}),
	}
}

func newTokensRotateCmd(s *state, scope func() client.TokenScope) *cobra.Command {
	return &cobra.Command{
		Use:   "rotate <token-id>",
		Short: "Replace a token by a new one and revoke it",
		Long: `Make a new token with the same name and lifetime as <token-id>, print it (shown
only this once), and revoke <token-id>.`,
		Example: `  sparecap tokens rotate tok-3f2a9c1d0b7e4a55`,
		Args:    cobra.ExactArgs(1),
		RunE: s.run(func(cmd *cobra.Command, c *client.Client, args []string) error {
			t, err := c.RotateToken(cmd.Context(), scope(), args[0])
			if err != nil {
				return fmt.Errorf("rotate token %s: %w", args[0], err)
			}
			return s.printNewToken(cmd, t)
		}),
	}
}

// printNewToken shows a token just made, whose secret the server never
// shows again.
func (s *state) printNewToken(cmd *cobra.Command, t *apiv1.Token) error {
	if err := s.print(cmd.OutOrStdout(), t, func(tw *tabwriter.Writer) {
		row(tw, "ID:", t.TokenID)
		row(tw, "Name:", t.Name)
		row(tw, "Expires:", s.optTime(t.ExpiresAt))
		row(tw, "Token:", t.Token)
	}); err != nil {
		return err
	}
	fmt.Fprintln(cmd.ErrOrStderr(), "Note: the token is shown only once; store it now (it cannot be retrieved later).")
	return nil
}

// optTime is localTime of an optional time ("never" when unset).
func (s *state) optTime(t *time.Time) string {
	if t == nil {
		return "never"
	}
	return s.localTime(*t)
}
