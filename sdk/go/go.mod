module nodestatus.dev/sdk

go 1.24
