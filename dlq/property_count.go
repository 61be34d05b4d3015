package dlq

// PropertyCount is an application property's key, or one of its values, and
// how many of the messages looked at have it.
type PropertyCount struct {
	Text  string
	Count int64
}

// PropertySample is how many of a list's newest messages the catalog looks
// at to suggest property keys and values: counting over every message of a
// broad list would read a million JSON objects.
const PropertySample = 500
