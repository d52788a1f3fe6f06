package main

import (
	"fmt"
	"os"

	"github.com/cdc-outbox/cdc-outbox/config"
	"github.com/spf13/cobra"
)

func configCommand() *cobra.Command {
	cmd := &cobra.Command{
		Use:   "config",
		Short: "About the configuration file",
		Args:  cobra.NoArgs,
	}
	var out string
	ref := &cobra.Command{
		Use:   "reference",
		Short: "Print every configuration key with its type, default, variable, rule and meaning (Markdown)",
		Long: `reference prints the configuration reference, docs/configuration.md: every key
of the configuration file by section, with its type, default, CDC_OUTBOX_*
environment variable, -file variant (secrets), the rule validation enforces
and one sentence, generated from the configuration structs. -o writes it to
a file instead (make docs: -o docs/configuration.md).`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			text, err := config.Reference()
			if err != nil {
				return err
			}
			if out == "" {
				_, err = fmt.Fprint(cmd.OutOrStdout(), text)
				return err
			}
			return os.WriteFile(out, []byte(text), 0o644)
		},
	}
	ref.Flags().StringVarP(&out, "output", "o", "", "write to this file instead of standard output")
	cmd.AddCommand(ref)
	return cmd
}
