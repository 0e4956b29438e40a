module hung-task

go 1.24

require nodestatus.dev/sdk v0.0.0

replace nodestatus.dev/sdk => ../../../../sdk/go
