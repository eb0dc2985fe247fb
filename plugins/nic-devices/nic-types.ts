/** The nictypes this build has: the `nic-type` extension point, filled by this plugin and others. */
import { NIC_TYPE_POINT, TypeRegistry, type NicType, type PluginCatalog, type TypeAvailability } from '../../sdk/index.js';

export class NicTypes {
  private readonly types: TypeRegistry<NicType>;

  constructor(catalog: PluginCatalog) {
    this.types = new TypeRegistry(NIC_TYPE_POINT, 'nictype', catalog);
  }

  register(type: NicType): void {
    this.types.register(type.nictype, type);
  }

  /** NIC type plugins register in their register phase only. */
  seal(): void {
    this.types.seal();
  }

  get(nictype: string | undefined): NicType | undefined {
    return nictype === undefined ? undefined : this.types.get(nictype);
  }

  availability(nictype: string): TypeAvailability {
    return this.types.availability(nictype);
  }

  /** The nictype of NICs on a managed network of this type (`bridged` on a `bridge`), if NICs may use it. */
  forNetwork(networkType: string): string | undefined {
    return this.types.values().find((t) => t.networkTypes?.includes(networkType))?.nictype;
  }
}
