package main

func healthcheckFlags(f *flagSet) {
	f.str("url", envHealthcheckURL, "", "health URL to GET (default: /healthz on "+envAddr+", or "+defaultAddr+")")
}
