module linuxonly

go 1.21
