/** envd's port inside every sandbox: the one place sandboxd writes it (the runtime starts envd on it, the API and the client use it). */
export const ENVD_PORT = 49983;
