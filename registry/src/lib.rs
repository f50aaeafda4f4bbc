//! Interface registry: the typed YAML model of every way Koru can control or observe an IDE (arrives with the registry issue).
