module example.invalid/breakerbank/bindings/go

go 1.19
