module kubewasm.dev/examples/podset

go 1.26

require kubewasm.dev/guest v0.0.0

// The SDK of this checkout; point it at guests/go of yours when copying this module out.
replace kubewasm.dev/guest => ../../../guests/go
