// Package openapi describes the REST API as data and builds its OpenAPI
// 3.1 document from that data and the wire types' Go declarations: the
// same list of operations registers the server's handlers, so a route
// cannot exist without being documented, nor the reverse.
package openapi

// Access says who may call an operation.
type Access string

const (
	// Public operations take no token.
	Public Access = "public"
	// AnyToken takes a project's token or the operator's.
	AnyToken Access = "token"
	// Admin takes the operator's (admin) token only.
	Admin Access = "admin"
)

// Media types the API answers with besides JSON.
const (
	JSON = "application/json"
	SSE  = "text/event-stream"
	CSV  = "text/csv"
)

// Param is a query parameter. Type is a JSON Schema type ("string",
// "integer", "number", "boolean") or a string format ("date-time",
// "date"); Enum, when set, lists the values taken.
type Param struct {
	Name        string
	Type        string
	Description string
	Required    bool
	Enum        []string
}

// Response is one answer of an operation. Body is a value of the Go type
// written (nil: no body). A CSV answer lists its Columns; a stream of
// server-sent events gives the type of each event's data as Event.
type Response struct {
	Status      int
	Description string
	Media       string
	Body        any
	Columns     []string
	MoreColumns []string
	Event       any
}

// Op is one operation: a method on a path and its contract.
type Op struct {
	ID          string
	Method      string
	Path        string
	Tag         string
	Summary     string
	Description string
	Access      Access
	Query       []Param
	// Request is a value of the body's Go type (nil: no body); with
	// OptionalBody an empty body is taken too.
	Request      any
	OptionalBody bool
	Responses    []Response
	// Errors are the error statuses the operation answers besides those
	// every authenticated operation may (401, 429, 500, 503; 403 for
	// Admin ones).
	Errors []int
}

// Key is how an operation is named in tests and messages: "GET /v1/x".
func (o Op) Key() string { return o.Method + " " + o.Path }
