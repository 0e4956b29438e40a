module {{name}}

go 1.24

require nodestatus.dev/sdk v0.0.0

// The SDK is in {{kit}}/, written by `nodestatus new`: no download.
replace nodestatus.dev/sdk => ./{{kit}}/sdk/go
