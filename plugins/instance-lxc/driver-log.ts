/** The logger the liblxc driver and its helpers' supervisors write to (the plugin's bunyan child). */
export interface DriverLog {
  debug(obj: object, msg?: string): void;
  info(obj: object, msg?: string): void;
  warn(obj: object, msg?: string): void;
  error(obj: object, msg?: string): void;
}
