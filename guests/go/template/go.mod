module example.com/greeter

go 1.26

require kubewasm.dev/guest v0.0.0

// When copied out of this repository, point this at guests/go of a kubewasm checkout.
replace kubewasm.dev/guest => ..
