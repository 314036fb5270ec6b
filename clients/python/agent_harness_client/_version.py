"""The version of the client."""

VERSION = "0.1.0"
