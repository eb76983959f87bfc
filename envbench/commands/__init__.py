"""One module per verb of `envbench`: each prints, and returns an exit code. Nothing in the
package imports this one; the nox sessions reach it through `envbench` (cli.py)."""
