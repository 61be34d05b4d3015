package main

func emulatorFlags(f *flagSet) {
	f.str("amqp-addr", envEmulatorAMQPAddr, defaultEmulatorAMQP, "address the emulator's AMQP 1.0 endpoint listens on")
	f.str("admin-addr", envEmulatorAdmin, defaultEmulatorAdm, "address the emulator's admin HTTP endpoint listens on")
	f.str("config", envEmulatorConfig, "", "entities to create, in the Microsoft Service Bus emulator's Config.json format")
	logFlags(f)
}
