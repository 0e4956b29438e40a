module nodestatus.dev/plugins/local-disks

go 1.24

require nodestatus.dev/sdk v0.0.0

replace nodestatus.dev/sdk => ../../../sdk/go
