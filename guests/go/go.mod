module kubewasm.dev/guest

go 1.26
